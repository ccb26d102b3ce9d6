"""Committed data carried over to new fingerprints only when a rerun of each changed component's
cheapest job reproduces its stored numbers (sandbox.analysis.restamp)."""

from __future__ import annotations

import pandas as pd

from sandbox.analysis import figure_data
from sandbox.analysis.restamp import restamp, same_numbers
from sandbox.jobs.fingerprints import changed
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig


def _file(tmp_path, tamper=None):
    base = RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=4, log_points=2)
    jobs = [Job.training(base.replace(seed=s, estimator=e)) for s in (0, 1) for e in ("dg", "reinforce")]
    store = ResultsStore(tmp_path / "r")
    run_sweep(jobs, store, workers=1, progress=False)
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet")
    entries = []
    for job_id, frame, entry, _ in figure_data.read_jobs(path):  # as if made by code whose dg and loop moved
        prints = {k: ("0" * 16 if k.startswith(("estimator:dg", "runtime")) else v)
                  for k, v in entry["code"]["fingerprints"].items()}
        if tamper is not None:
            frame = tamper(job_id, frame)
        entries.append((job_id, frame, entry["metadata"], {**entry["code"], "fingerprints": prints}))
    figure_data.write(entries, path)
    return path


def test_changed_fingerprints_are_restamped_after_a_rerun_reproduces_the_numbers(tmp_path):
    path = _file(tmp_path)
    before = {j: set(changed(e["code"]["fingerprints"])) for j, _, e, _ in figure_data.read_jobs(path)}
    assert all(before.values())
    report = restamp(path)
    assert report["components"] == sorted(set().union(*before.values())) and not report["differs"]
    assert 1 <= len(report["identical"]) <= 2  # the cheapest dg job covers dg and the loop; one more at most
    assert sorted(report["restamped"]) == sorted(before)
    assert all(not changed(e["code"]["fingerprints"]) for _, _, e, _ in figure_data.read_jobs(path))
    assert restamp(path)["components"] == []  # nothing left to carry over


def test_a_rerun_that_differs_leaves_the_file_as_it_was(tmp_path):
    def nudge(job_id, frame):
        frame = frame.copy()
        frame["error"] = frame["error"] + 1e-12  # one stored number off in its last bits
        return frame

    path = _file(tmp_path, nudge)
    before = path.read_bytes()
    report = restamp(path)
    assert report["differs"] and not report["restamped"] and path.read_bytes() == before


def test_same_numbers_ignores_timing_and_new_columns_but_not_a_value():
    stored = pd.DataFrame({"step": [0, 1], "error": [0.5, 0.25], "wall_time": [0.1, 0.2]})
    again = stored.assign(wall_time=[9.0, 9.5], entropy=[1.0, 0.9])  # a new diagnostic column
    assert same_numbers(stored, again)
    assert not same_numbers(stored, again.assign(error=[0.5, 0.2500001]))
    assert not same_numbers(stored, again.drop(columns="error"))
