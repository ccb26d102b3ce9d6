"""The cost line of ``sandbox reproduce`` counts the notebooks as they execute: side by side, one per core."""

import pytest

from sandbox import reproduce_costs
from sandbox.jobs.store import ResultsStore, write_record
from sandbox.jobs.sweep import Job
from sandbox.runtime.config import RunConfig


@pytest.mark.parametrize("workers, cpus, expected", [(1, 2, 30.0), (2, 2, 15.0), (None, 2, 15.0), (4, 2, 15.0),
                                                     (2, 1, 30.0), (8, 8, 10.0)])
def test_notebook_seconds_are_divided_among_the_cores_that_run_them(tmp_path, monkeypatch, workers, cpus, expected):
    seen = {}

    class Plan:
        def line(self, desc, extra_seconds=0.0, extra=""):
            seen["seconds"], seen["extra"] = extra_seconds, extra
            return desc

    monkeypatch.setattr(reproduce_costs.costs, "plan", lambda *a, **k: Plan())
    monkeypatch.setattr(reproduce_costs.os, "cpu_count", lambda: cpus)
    jobs = {}
    for i, (name, took) in enumerate([("fig-a", 10.0), ("fig-b", 12.0), ("fig-c", 8.0)]):
        jobs[name] = [Job.training(RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=2,
                                             seed=i))]
        write_record(reproduce_costs.record_paths(tmp_path, name, "quick", 0)[1], {"notebook_seconds": took})
    reproduce_costs.figures_plan(jobs, ResultsStore(tmp_path / "results"), tmp_path, "quick", 0, workers, False)
    assert seen["seconds"] == pytest.approx(expected)
    assert "3 of 3 notebooks to execute" in seen["extra"]
