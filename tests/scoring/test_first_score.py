"""A first ``sandbox score NEW`` on a fresh clone computes only NEW's jobs: the built-ins' results
ship with the package (``sandbox.scoring.builtin_data``, the mechanism ``sandbox check`` uses too)
and are restored into the fresh results folder (issue 47, item 8; timed by
``benchmarks/first_score.py``)."""

from __future__ import annotations

import pytest

import sandbox.scoring.builtin_data as builtin_data
from sandbox.scoring import score
from sandbox.scoring.battery import as_battery, build
from sandbox.scoring.recipes import DEFAULT_AGAINST, make_recipe
from sandbox.scoring.runner import default_store, jobs, run_battery

from .test_score import AGAINST, TINY

COLUMNS = ["method", "cell", "seed", "value", "score"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny battery's built-ins, computed once and exported: (the folder, their frame)."""
    here = tmp_path_factory.mktemp("shipped")
    battery = build(TINY)
    filled = default_store(here / "filled")
    frame, _ = run_battery(battery, [(make_recipe(m), ()) for m in DEFAULT_AGAINST], filled, workers=1, progress=False)
    builtin_data.export(battery, filled, here / builtin_data.data_path(battery).name)
    return here, frame


@pytest.fixture
def shipped(exported, monkeypatch):
    """The package ships the tiny battery's built-ins (``HERE`` patched); their frame."""
    here, frame = exported
    monkeypatch.setattr(builtin_data, "HERE", here)
    return frame


def _rows(frame, methods):
    mine = frame[frame["method"].isin(methods)][COLUMNS]
    return mine.sort_values(COLUMNS[:3]).reset_index(drop=True)


def test_a_first_score_computes_only_the_new_estimators_jobs(shipped, tmp_path):
    fresh = tmp_path / "results"
    frame = score("dg", settings={"eta": 0.5}, battery=TINY, against=AGAINST, results=fresh, workers=1, progress=False)
    assert frame.attrs["jobs"] == {"total": 6, "reused": 4, "computed": 2}  # 2 cells × (1 new + 2 restored)
    methods = AGAINST.split(",")
    assert _rows(frame, methods).equals(_rows(shipped, methods))  # the shipped numbers, exactly as stored
    again = score("dg", settings={"eta": 0.5}, battery=TINY, against=AGAINST, results=fresh, workers=1, progress=False)
    assert again.attrs["jobs"]["computed"] == 0
    done = builtin_data.first_run(default_store(fresh), build(TINY))  # what the benchmarks time
    assert {k: done[k] for k in ("jobs", "restored", "computed")} == {"jobs": 6, "restored": 4, "computed": 2}
    assert done["computed cpu_s"] > 0


def test_scoring_a_built_in_on_a_fresh_clone_computes_nothing(shipped, tmp_path):
    frame = score("dg", battery=TINY, against=AGAINST, results=tmp_path, workers=1, progress=False)
    assert frame.attrs["jobs"] == {"total": 6, "reused": 6, "computed": 0}


def test_other_seeds_are_other_jobs_and_are_computed(shipped, tmp_path):
    frame = score("dg", battery=TINY, against="reinforce", seeds=1, results=tmp_path, workers=1, progress=False)
    assert frame.attrs["jobs"] == {"total": 4, "reused": 0, "computed": 4}


def test_the_shipped_file_holds_every_built_in_job_of_the_quick_battery(tmp_path):
    quick = as_battery("quick")
    needed = {j.id for m in DEFAULT_AGAINST for j in jobs(quick, make_recipe(m))}
    committed = set(builtin_data.committed_ids(quick))
    if not committed & needed:  # a change of numbers (NUMERICS) made new ids: the file must be rewritten
        pytest.skip("sandbox/scoring/builtins-quick.parquet matches no job of this code's numerics: "
                    "nice -n 19 python benchmarks/check.py --export --results DIR --workers 1")
    assert needed <= committed
    store = default_store(tmp_path)
    kept = builtin_data.restore(quick, [make_recipe(m) for m in DEFAULT_AGAINST], store)
    assert set(kept) == needed and all(store.exists(i) for i in needed)  # kept whatever code made them
