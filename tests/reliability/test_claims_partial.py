"""A partial ``sandbox reproduce NAME --fidelity paper`` updates its figures' rows of CLAIMS.md and
keeps every other figure's rows; the totals are counted over the whole new file (issue 36: a
reproduce of gate into a fresh results folder left "0 PASS, 0 FAIL, 0 INFO" for the other 17)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.claims_file import Previous, _cells, write_claims_file

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "paper_figures" / "CLAIMS.md"


def _totals(text: str) -> tuple[str, str]:
    return re.search(r"\*\*Evidence:\*\* [^\n]*", text).group(0), re.search(r"Compute: [\d.]+ \w+ of job time", text).group(0)


def _recount(text: str) -> dict:
    counts: dict = {}
    for rows in Previous.read_text(text).claim_rows.values():
        for row in rows:
            key = (_cells(row)[2], _cells(row)[6].strip("*"))
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_a_partial_reproduce_updates_its_rows_and_keeps_the_others(tmp_path):
    figures_dir = tmp_path / "paper_figures"
    figures_dir.mkdir()
    shutil.copy(COMMITTED, figures_dir / "CLAIMS.md")
    before = Previous.read(figures_dir / "CLAIMS.md")
    names = list(before.figure_rows)
    assert len(names) >= 18 and "gate" in names
    results = tmp_path / "results"  # a fresh folder: only gate was run into it
    book = ClaimBook("gate", results / "claims" / "gate.paper.json")
    book.close("odd", "PG's weight is odd in A", 0.0, 0.0, 1e-12)
    book.less("new-evidence", "a new claim of gate", np.array([0.1, 0.2, 0.1]), np.array([0.5, 0.6, 0.7]))
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "gate.paper.json").write_text(json.dumps(
        {"note": "gate, again", "jobs": 1, "job_seconds": {"g": 1.0}, "notebook_seconds": 12, "commit": "1234abc"}))
    write_claims_file(figures_dir / "CLAIMS.md", [SimpleNamespace(name=n) for n in names], "paper", results,
                      data_dir=ROOT / "paper_figures" / "data", command="sandbox reproduce --fidelity paper",
                      headlines="")
    text = (figures_dir / "CLAIMS.md").read_text()
    after = Previous.read(figures_dir / "CLAIMS.md")
    assert list(after.figure_rows) == names
    for name in names:
        if name == "gate":
            assert "gate, again" in after.figure_rows[name] and len(after.claim_rows[name]) == 2
            continue
        assert after.figure_rows[name] == before.figure_rows[name], name  # kept, to the byte
        assert after.claim_rows.get(name) == before.claim_rows.get(name), name
    assert text.count("not run yet") == COMMITTED.read_text().count("not run yet")  # a figure kept as it was
    old = _recount(COMMITTED.read_text())
    new = _recount(text)
    assert new[("evidence", "PASS")] == old[("evidence", "PASS")] + 1  # gate's new claim, counted with the kept
    evidence, compute = _totals(text)
    assert evidence.startswith(f"**Evidence:** {new[('evidence', 'PASS')]} PASS, {new[('evidence', 'FAIL')]} FAIL, "
                               f"{new[('evidence', 'INFO')]} INFO")
    assert compute == _totals(COMMITTED.read_text())[1]  # the kept figures' job time from their data files


def test_a_figure_this_invocation_ran_without_a_record_is_not_kept_from_the_old_file(tmp_path):
    """A figure that was run and crashed (no record) says so; only figures not run keep their rows."""
    shutil.copy(COMMITTED, tmp_path / "CLAIMS.md")
    names = list(Previous.read(tmp_path / "CLAIMS.md").figure_rows)
    write_claims_file(tmp_path / "CLAIMS.md", [SimpleNamespace(name=n) for n in names], "paper", tmp_path / "results",
                      ran={"gate"}, headlines="")
    text = (tmp_path / "CLAIMS.md").read_text()
    assert "| `gate` | not run yet at paper fidelity |" in text
    assert Previous.read(tmp_path / "CLAIMS.md").figure_rows["kondo"] == Previous.read(COMMITTED).figure_rows["kondo"]
