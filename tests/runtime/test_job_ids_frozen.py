"""Composition by name (issue 47) keeps the stored form: every figure's job ids at quick and paper
fidelity are those computed at 8d46a5a, before ``policy``/``objective`` keys existed
(``data/figure_job_ids.json``; regenerate only for a change that means to move run ids)."""

import json
from pathlib import Path

import pytest

from sandbox.reproduce import figures

FROZEN = json.loads((Path(__file__).parent / "data" / "figure_job_ids.json").read_text())


def test_the_frozen_file_covers_every_figure():
    assert set(FROZEN) == {f.name for f in figures().select(None)}
    assert sum(len(ids) for by_fidelity in FROZEN.values() for ids in by_fidelity.values()) > 1000


@pytest.mark.parametrize("fidelity", ["quick", "paper"])
def test_every_figures_job_ids_are_unchanged(fidelity):
    moved = {}
    for figure in figures().select(None):
        ids = sorted(job.id for job in figure.jobs(fidelity))
        if ids != FROZEN[figure.name][fidelity]:
            moved[figure.name] = (len(set(ids) - set(FROZEN[figure.name][fidelity])),
                                  len(set(FROZEN[figure.name][fidelity]) - set(ids)))
    assert not moved, f"job ids moved (new, gone) per figure: {moved}"
