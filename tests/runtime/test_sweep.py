"""Sweeps: job identity, skipping finished jobs, failures, a real kill-and-resume, Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, load_results, run_sweep
from sandbox.runtime.config import RunConfig

HERE = Path(__file__).parent
SMALL = {"N": 2, "K": 3, "batch_size": 2, "samples_per_context": 2}


def _jobs(n=3):
    return [Job.training(RunConfig(task="bandit", task_kwargs=SMALL, steps=5, seed=s, log_points=3)) for s in range(n)]


def fails() -> pd.DataFrame:
    raise RuntimeError("this job fails on purpose")


def test_job_identity():
    a, b = _jobs(2)
    assert a.id != b.id and a.id == _jobs(1)[0].id
    assert Job("m:f", {"x": 1, "y": [1, 2]}).id == Job("m:f", {"y": [1, 2], "x": 1}, label="other").id
    cfg = RunConfig(task="bandit", task_kwargs=SMALL, steps=5, log_points=3)
    assert Job.training(cfg).id == Job.training(cfg.replace(label="renamed")).id
    with pytest.raises(ValueError, match="job fn must look like"):
        Job("nofunction").resolve()


def test_finished_jobs_are_never_recomputed(tmp_path):
    store = ResultsStore(tmp_path)
    first = run_sweep(_jobs(3), store, workers=1, progress=False)
    assert (first.total, first.skipped, first.computed) == (3, 0, 3)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.parquet")}
    again = run_sweep(_jobs(4), store, workers=1, progress=False)
    assert (again.skipped, again.computed) == (3, 1)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    frame = load_results(_jobs(4), store)
    assert frame.job_id.nunique() == 4


def test_a_failing_job_does_not_stop_the_sweep(tmp_path):
    store = ResultsStore(tmp_path)
    jobs = [Job("tests.runtime.test_sweep:fails", {}, "bad"), *_jobs(2)]
    report = run_sweep(jobs, store, workers=1, progress=False)
    assert report.computed == 2 and list(report.failed) == [jobs[0].id]
    assert "fails on purpose" in report.failed[jobs[0].id]
    with pytest.raises(ValueError, match="have no results yet"):
        load_results(jobs, store)


def test_process_pool_backend(tmp_path):
    report = run_sweep(_jobs(3), ResultsStore(tmp_path), workers=2, progress=False)
    assert report.computed == 3 and report.ok


def _sweep_cmd(results):
    return [sys.executable, "-m", "sandbox.cli", "--plugin", str(HERE / "sweep_plugin.py"), "sweep", "test-sweep",
            "--results", str(results), "--workers", "2"]


def test_killed_sweep_resumes_without_recomputing_or_corrupting(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.Popen(_sweep_cmd(results), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(results.glob("*.parquet"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, mid-flight
    proc.wait()
    done_before = {p.name: p.stat().st_mtime_ns for p in results.glob("*.parquet")}
    assert 3 <= len(done_before) < 16, "the sweep must be killed mid-way"
    for p in results.glob("*.parquet"):
        pd.read_parquet(p)  # every file present is complete
    rerun = subprocess.run(_sweep_cmd(results), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"16 jobs, {len(done_before)} already done, {16 - len(done_before)} computed, 0 failed" in rerun.stdout
    assert {p.name: p.stat().st_mtime_ns for p in results.glob("*.parquet") if p.name in done_before} == done_before
    assert len(list(results.glob("*.parquet"))) == 16
    frames = [pd.read_parquet(p) for p in results.glob("*.parquet")]
    assert sorted(f.seed.iloc[0] for f in frames) == list(range(16))


@pytest.mark.xdist_group("ray")
def test_ray_backend(tmp_path):
    pytest.importorskip("ray")
    from sandbox.jobs.pool import import_plugins
    from tests.reliability.test_processes import PLUGIN

    plugin = tmp_path / "halved_ray_plugin.py"
    plugin.write_text(PLUGIN.format(name="halved_ray"))
    import_plugins([str(plugin)])  # the driver knows it (RunConfig validates names); Ray workers import it again
    planned = Job.training(RunConfig(task="bandit", task_kwargs=SMALL, estimator="halved_ray", steps=3, log_points=2))
    store = ResultsStore(tmp_path)
    try:
        report = run_sweep(_jobs(3) + [Job("tests.runtime.test_sweep:fails", {}, "bad"), planned], store,
                           backend="ray", workers=2, progress=False, plugins=[str(plugin)])
    finally:
        from sandbox.estimators import ESTIMATORS

        ESTIMATORS._entries.pop("halved_ray", None)
        sys.modules.pop("halved_ray_plugin", None)
    assert report.computed == 4 and len(report.failed) == 1, report.failed  # the plugin's estimator ran on Ray
    plugin_code, builtin_code = store.code(planned.id), store.code(_jobs(1)[0].id)
    assert "estimator:halved_ray" in plugin_code["fingerprints"]  # the plugin's own code is stamped
    numeric = ("fingerprints", "portable", "paths", "modules")  # the plugin's components' fingerprints
    assert {k: v for k, v in plugin_code.items() if k not in numeric} == \
        {k: v for k, v in builtin_code.items() if k not in numeric} != {}
    # a worker imports task modules as its jobs need them (load_tasks(name)), so the modules a stamp
    # lists depend on the jobs it ran before; where both stamps list a module, it is the same code
    common = plugin_code["modules"].keys() & builtin_code["modules"].keys()
    assert "estimators/base.py" in common
    assert all(plugin_code["modules"][m] == builtin_code["modules"][m] for m in common)
    local = ResultsStore(tmp_path / "local")
    run_sweep(_jobs(3), local, workers=1, progress=False)
    for job in _jobs(3):  # Ray and local processes give the same numbers
        a = store.read(job.id).drop(columns=["wall_time"])
        b = local.read(job.id).drop(columns=["wall_time"])
        assert a.equals(b)


def test_unknown_backend(tmp_path):
    with pytest.raises(ValueError, match="backend must be one of"):
        run_sweep(_jobs(1), ResultsStore(tmp_path), backend="dask")
