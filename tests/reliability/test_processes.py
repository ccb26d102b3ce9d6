"""Sweeps under real process faults: an OOM-killed worker, a SIGKILLed driver, Ctrl-C, two sweeps on
one folder, plugins in worker processes, thread counts that do not depend on the pool size."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sandbox.core.processes import HOST, descendants, process_alive
from sandbox.jobs.pool import import_plugins
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, load_results, run_sweep
from sandbox.runtime.config import RunConfig
from tests.reliability.jobs import sweep_jobs

pytestmark = pytest.mark.xdist_group("ray")  # real processes: kept off the busy xdist workers

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = '''
from dataclasses import dataclass

from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("{name}")
@dataclass(frozen=True)
class Halved(Estimator):
    """REINFORCE at half the step."""

    def token_loss(self, t: PGTerms):
        return -0.5 * t.token_advantages * t.logp
'''
SMALL = {"N": 2, "K": 3, "batch_size": 2, "samples_per_context": 2}


def wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def terminal_sigint() -> None:
    """In the child before exec: Ctrl-C as at a terminal. A test process may have SIGINT ignored (an
    ignored signal is inherited through exec, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def driver(results: Path, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.jobs", str(results), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=terminal_sigint, **popen)


def test_an_oom_killed_worker_costs_one_job_not_the_sweep(tmp_path):
    marker = tmp_path / "died-once"
    jobs = [Job("tests.reliability.jobs:oom", {}, "always"), Job("tests.reliability.jobs:oom", {"marker": str(marker)}),
            *sweep_jobs(3, 0.0, "")]
    report = run_sweep(jobs, ResultsStore(tmp_path), workers=2, progress=False)
    assert report.computed == 4 and list(report.failed) == [jobs[0].id]
    assert "killed by SIGKILL" in report.failed[jobs[0].id] and "2 times" in report.failed[jobs[0].id]
    assert marker.exists()  # the second job died once, then ran again and finished
    assert not list(tmp_path.glob("*.lock"))


def test_workers_exit_when_the_driver_is_killed_and_a_rerun_takes_over(tmp_path):
    results, log = tmp_path / "results", str(tmp_path / "log")
    proc = driver(results, "--n", "2", "--seconds", "2", "--log", log)
    wait_for(lambda: len(list(tmp_path.glob("log.started.*"))) == 2)
    workers = sorted(descendants(proc.pid))  # the two workers and multiprocessing's resource tracker
    assert len(workers) >= 2
    proc.kill()
    proc.wait()
    start = time.time()
    wait_for(lambda: not any(process_alive(HOST, pid) for pid in workers), seconds=5)
    assert time.time() - start < 5
    assert len(list(results.glob("*.lock"))) == 2  # the dead driver's claims are left behind, stale
    rerun = driver(results, "--n", "2", "--seconds", "2", "--log", log, "--workers", "1")
    out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, err
    assert "computed=2 elsewhere=0" in out
    assert not list(results.glob("*.lock"))


def test_two_sweeps_on_one_folder_compute_every_job_once(tmp_path):
    results, log = tmp_path / "results", tmp_path / "log"
    args = ("--n", "8", "--seconds", "0.3", "--log", str(log), "--workers", "1")  # each computes in-process
    procs = [driver(results, *args), driver(results, *args)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    counts = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert counts == Counter({str(i): 1 for i in range(8)})
    reports = [dict(item.split("=") for item in out.split()) for out, _ in outs]
    assert sum(int(r["computed"]) for r in reports) == 8
    # each accounts for all eight: computed, done by the other meanwhile, or done before it looked
    assert [sum(int(r[k]) for k in ("computed", "elsewhere", "skipped")) for r in reports] == [8, 8]
    assert len(load_results(sweep_jobs(8, 0.3, str(log)), ResultsStore(results))) == 8


def test_ctrl_c_stops_everything_at_once_and_keeps_finished_results(tmp_path):
    results, log = tmp_path / "results", str(tmp_path / "log")
    proc = driver(results, "--n", "4", "--quick", "2", "--seconds", "60", "--log", log, start_new_session=True)
    wait_for(lambda: len(list(tmp_path.glob("log.started.*"))) == 4)  # two finished, two running
    children = sorted(descendants(proc.pid))
    workers = [pid for pid in children if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(workers) == 2
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    out, err = proc.communicate(timeout=15)
    assert not any(process_alive(HOST, pid) for pid in workers)  # terminated before the driver exits
    assert proc.returncode == 130
    assert out.strip() == "interrupted: rerun the same command to resume"
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err
    # the workers were terminated before the driver exited; multiprocessing's resource tracker
    # follows as soon as it sees the driver's pipe close
    wait_for(lambda: not any(process_alive(HOST, pid) for pid in children), seconds=5)
    store = ResultsStore(results)
    assert sorted(store.job_ids()) == sorted(j.id for j in sweep_jobs(4, 60, log, quick=2)[:2])
    assert all(store.state(j) == "ok" for j in store.job_ids())
    assert not list(results.glob("*.lock")) and not list(results.glob(".*.tmp"))


def test_plugin_estimators_work_in_worker_processes(tmp_path):
    plugin = tmp_path / "halved_plugin.py"
    plugin.write_text(PLUGIN.format(name="halved_local"))
    import_plugins([str(plugin)])  # the driver knows it (RunConfig validates names); workers must import it again
    jobs = [Job.training(RunConfig(task="bandit", task_kwargs=SMALL, estimator="halved_local", steps=3, seed=s,
                                   log_points=2)) for s in range(2)]
    try:
        report = run_sweep(jobs, ResultsStore(tmp_path / "results"), workers=2, progress=False, plugins=[str(plugin)])
        assert report.computed == 2, report.failed
    finally:
        from sandbox.estimators import ESTIMATORS

        ESTIMATORS._entries.pop("halved_local", None)
        sys.modules.pop("halved_plugin", None)


def test_a_jobs_thread_count_does_not_depend_on_the_pool(tmp_path):
    jobs = [Job("tests.reliability.jobs:threads", {}), Job("tests.reliability.jobs:threads", {}, threads=2)]
    assert jobs[0].id != jobs[1].id
    one, two = ResultsStore(tmp_path / "one"), ResultsStore(tmp_path / "two")
    run_sweep(jobs, one, workers=1, progress=False)
    run_sweep(jobs, two, workers=2, progress=False)
    for store in (one, two):
        assert [store.read(j.id).threads.iloc[0] for j in jobs] == [1, 2]
