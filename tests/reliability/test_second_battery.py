"""The second battery's bad cases (issue 46) that this module's owner fixed, each with its one-line
outcome before any work, or its correct result: R6 (an empty ``$SANDBOX_RESULTS``), R7 (unbounded
integers, log points, an infinite delay), R8 (seeds, a config's group size), R9 (a lock stamped a
day ahead, a Ray that does not start), R10 (a 200,000-deep ``--config``, a plugin that fails only in
the workers — for two jobs and for twelve —, ``sandbox run``'s contract check), item 5 (a run's
time; ``regime`` and ``hf_text`` in test_run_estimates.py). R1 is in test_identity.py,
R2 in test_identity.py and test_claims_partial.py, R4 in test_names.py, R11 in
test_portable_fingerprints.py and tests/golden."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.cli import main
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


def error_line(capsys, *argv: str) -> str:
    """Run the CLI in this process; require exit code 2 and one line on stderr, and return it."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


def test_r6_an_empty_sandbox_results_is_the_default_folder_not_the_current_one():
    code = "from sandbox.jobs.store import DEFAULT_ROOT; print(DEFAULT_ROOT)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SANDBOX_RESULTS": "", "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "results"


INT64 = "must lie within ±2**62 (an int64, with room for sums of steps and delays), got "


@pytest.mark.parametrize("fields, line", [
    ({"staleness": {"kind": "fixed", "D": 2**64}}, "staleness: D " + INT64 + str(2**64)),
    ({"staleness": {"kind": "fixed", "D": 2, "broadcast_every": 2**64}}, "staleness: broadcast_every " + INT64),
    ({"staleness": {"kind": "uniform", "D": 10**20}}, "staleness: D " + INT64 + str(10**20)),
    ({"staleness": {"kind": "fixed", "D": 2, "admission": "drop", "budget": 2**64}}, "staleness: budget " + INT64),
    ({"steps": 2**64}, "steps " + INT64),
    ({"steps": 100, "log_points": 10**12}, "log_points must lie in [1, 101], got 1000000000000"),
    ({"staleness": {"kind": "geometric", "D": 5, "p": 5e-324}},
     "staleness: its delay cannot be drawn at step 0 (OverflowError: cannot convert float infinity to integer)"),
])
def test_r7_unbounded_values_are_one_line_naming_the_field_and_the_limit_before_any_step(fields, line):
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        RunConfig(task="bandit", **fields)
    assert str(err.value).startswith(line) and "\n" not in str(err.value), str(err.value)
    assert time.perf_counter() - start < 5  # at validation, not after a run


def test_r7_values_within_the_limits_still_run():
    RunConfig(task="bandit", steps=5, staleness={"kind": "uniform", "D": 2**62})
    RunConfig(task="bandit", steps=5, log_points=30)  # the default, whatever the steps
    RunConfig(task="bandit", steps=1000, log_points=1001)


@pytest.mark.parametrize("owner", ["", json.dumps({"host": "this", "pid": 0, "start": "0"})])
def test_r9_a_lock_stamped_a_day_ahead_is_judged_by_its_owner_not_its_timestamp(tmp_path, caplog, monkeypatch, owner):
    """A half-written lock (no owner yet), or one whose owner is dead, stamped a day in the future
    (clock skew): taken over with a warning, the job computed — it used to stall the sweep forever."""
    from sandbox.core.processes import HOST

    store = ResultsStore(tmp_path)
    monkeypatch.setattr(ResultsStore, "HALF_WRITTEN_SECONDS", 0.3)
    job = Job("tests.reliability.jobs:tick", {"x": 1})
    lock = store.lock_path(job.id)
    lock.write_text(owner.replace('"this"', json.dumps(HOST)).replace('"pid": 0', '"pid": 999999999'))
    os.utime(lock, (time.time() + 86400, time.time() + 86400))
    with caplog.at_level(logging.WARNING):
        report = run_sweep([job], store, workers=1, progress=False, poll_seconds=0.05)
    assert report.computed == 1 and store.state(job.id) == "ok"
    assert any("taking over the stale lock" in r.getMessage() for r in caplog.records)


def test_r10_a_deep_config_is_one_line_not_a_recursion_error(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    line = error_line(capsys, "run", "--config", str(deep))
    assert re.search(r"--config .*deep\.json: nested deeper than 100 levels \(at character 100\)", line), line
    line = error_line(capsys, "run", "--set", "task_kwargs=" + "[" * 5000 + "]" * 5000)
    assert "nested deeper than 100 levels" in line and "RecursionError" not in line, line


def test_r8_seeds_the_machine_cannot_hold_are_one_line_before_any_job(tmp_path):
    from sandbox.scoring import score

    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        score("dg", seeds=100_000, results=tmp_path / "r", workers=1, progress=False)
    line = str(err.value)
    assert re.match(r"seeds 100000 on cell '[^']+' \(\w+\): task_kwargs: task '\w+' with population=100000, .* would "
                    r"need about [\d,.]+ GiB of memory .*more than this machine's", line) and "\n" not in line, line
    assert time.perf_counter() - start < 30 and not (tmp_path / "r").exists()  # before any job, nothing written


def test_r5_an_edit_on_a_numeric_settings_code_path_recomputes_naming_the_component(tmp_path, monkeypatch, caplog):
    """Doubling the KL term, taken only when kl_coef > 0, moved no fingerprint (the canaries run at
    kl_coef = 0) and the stored result was reused; the path fingerprint (each numeric setting in
    turn off its value) sees it."""
    from sandbox.core.terms import TokenLoss
    from sandbox.estimators.base import Estimator
    from sandbox.jobs import fingerprints

    fingerprints.reset()
    store = ResultsStore(tmp_path)
    jobs = [Job.training(RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=3,
                                   log_points=2, estimator=e)) for e in ("dg", "reinforce")]
    run_sweep(jobs, store, workers=1, progress=False)
    before = {k: (fingerprints.fingerprint(k), fingerprints.portable_fingerprint(k)) for k in ("estimator:dg",)}
    penalized = Estimator.penalized_token_loss

    def doubled_kl(self, terms):
        out = penalized(self, terms)
        if self.kl_coef == 0:
            return out
        sq = (terms.logp - terms.behavior_logp).pow(2)
        return TokenLoss(out.values + self.kl_coef * sq, out.mask, out.metrics)  # the KL term once more

    monkeypatch.setattr(Estimator, "penalized_token_loss", doubled_kl)
    fingerprints.reset()
    assert {k: (fingerprints.fingerprint(k), fingerprints.portable_fingerprint(k)) for k in before} == before
    with caplog.at_level(logging.WARNING, logger="sandbox.jobs.sweep"):
        report = run_sweep(jobs, store, workers=1, progress=False)
    assert report.computed == 2 and set(report.changed) >= {"estimator:dg", "estimator:reinforce"}
    assert any(r.getMessage().startswith("the numbers of estimator:dg changed") for r in caplog.records)
    fingerprints.reset()


@pytest.fixture
def hanging_ray(monkeypatch):
    """``ray.init`` that waits forever, as with no usable network (it used to wait 240 s until killed)."""
    import threading

    import ray

    released = threading.Event()
    calls = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: (calls.append(kwargs), released.wait(60)))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("SANDBOX_RAY_START_TIMEOUT", "0.5")
    yield calls
    released.set()


def test_r9_a_ray_that_does_not_start_is_one_line_after_the_timeout(hanging_ray, capsys):
    from sandbox.core.processes import start_ray
    from sandbox.core.ray_start import RayStartTimeout

    start = time.perf_counter()
    with pytest.raises(RayStartTimeout) as err:
        start_ray(None, 2)
    assert time.perf_counter() - start < 5 and len(hanging_ray) == 1
    assert str(err.value) == ("starting a local Ray: Ray did not start within 0.5 s; check this host's network (Ray's "
                              "processes talk over it) and load, or wait longer: $SANDBOX_RAY_START_TIMEOUT=SECONDS")
    start = time.perf_counter()
    line = error_line(capsys, "run", "--async-workers", "1", "--set", "steps=2", "--no-store", "--quiet")
    assert line.startswith("sandbox: error: starting a local Ray: Ray did not start within 0.5 s;"), line
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_r9_the_ray_start_timeout_is_checked(monkeypatch, value):
    from sandbox.core.ray_start import start_timeout

    monkeypatch.setenv("SANDBOX_RAY_START_TIMEOUT", value)
    with pytest.raises(ValueError, match=re.escape(f"$SANDBOX_RAY_START_TIMEOUT must be a number of seconds > 0, "
                                                   f"got {value!r}")):
        start_timeout()


WORKER_ONLY_PLUGIN = '''
import os

if os.environ.get("R10_DRIVER_PID") != str(os.getpid()):
    raise RuntimeError("no licence server in this process")
'''
DETACHED_PLUGIN = '''
from dataclasses import dataclass

from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("r10_detached")
@dataclass(frozen=True)
class Detached(Estimator):
    """A loss built from numbers: no gradient."""

    def token_loss(self, t: PGTerms):
        return -t.token_advantages * t.logp.detach()
'''


def test_r10_a_plugin_that_fails_only_in_the_workers_is_one_line_per_job_naming_plugin_job_and_error(
        tmp_path, monkeypatch, caplog, capfd):
    """It used to print a raw traceback per worker, each job dying as "worker process exited with code 1"."""
    plugin = tmp_path / "r10_worker_only.py"
    plugin.write_text(WORKER_ONLY_PLUGIN)
    monkeypatch.setenv("R10_DRIVER_PID", str(os.getpid()))
    monkeypatch.setenv("SANDBOX_PLUGINS", "")
    jobs = [Job("tests.reliability.jobs:tick", {"x": x}) for x in (1, 2)]
    try:
        with caplog.at_level(logging.WARNING, logger="sandbox.jobs.sweep"):
            report = run_sweep(jobs, ResultsStore(tmp_path / "r"), workers=2, progress=False, plugins=[str(plugin)])
    finally:
        sys.modules.pop("r10_worker_only", None)
    line = (rf"plugin '{re.escape(str(plugin))}' failed to load in worker process \d+ \(it loaded in the driver\): "
            r"RuntimeError: no licence server in this process")
    assert report.computed == 0 and set(report.failed) == {j.id for j in jobs}
    assert all(re.fullmatch(line, error) for error in report.failed.values()), report.failed
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 2, errors  # one per job, not retried
    for job in jobs:
        assert any(re.fullmatch(rf"job {job.id} failed: {line}", e) for e in errors), errors
    assert "Traceback" not in capfd.readouterr().err


def test_r10_many_jobs_failing_on_a_worker_only_plugin_are_one_line_each_from_workers_that_stay(
        tmp_path, monkeypatch, caplog, capfd):
    """Twelve jobs on two workers, the plugin failing in both: one line per job (plugin, job, error),
    none retried, no worker respawned per job, no traceback — not a wall of them."""
    plugin = tmp_path / "r10_worker_only_many.py"
    plugin.write_text(WORKER_ONLY_PLUGIN)
    monkeypatch.setenv("R10_DRIVER_PID", str(os.getpid()))
    monkeypatch.setenv("SANDBOX_PLUGINS", "")
    jobs = [Job("tests.reliability.jobs:tick", {"x": x}) for x in range(12)]
    try:
        with caplog.at_level(logging.INFO, logger="sandbox.jobs.sweep"):
            report = run_sweep(jobs, ResultsStore(tmp_path / "r"), workers=2, progress=False, plugins=[str(plugin)])
    finally:
        sys.modules.pop("r10_worker_only_many", None)
    line = (rf"job (\w+) failed: plugin '{re.escape(str(plugin))}' failed to load in worker process (\d+) \(it "
            r"loaded in the driver\): RuntimeError: no licence server in this process")
    assert report.computed == 0 and set(report.failed) == {j.id for j in jobs}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    matches = [re.fullmatch(line, e) for e in errors]
    assert all(matches) and len(errors) == len(jobs), errors  # one line each, nothing else (no "running it again")
    assert sorted(m.group(1) for m in matches) == sorted(j.id for j in jobs)
    assert len({m.group(2) for m in matches}) <= 2  # the two workers answered every job
    assert "Traceback" not in capfd.readouterr().err


def test_r10_sandbox_run_checks_a_plugin_estimator_as_a_sweep_does(tmp_path, monkeypatch, capsys):
    """It trained until the backward pass: 'element 0 of tensors does not require grad'."""
    plugin = tmp_path / "r10_detached.py"
    plugin.write_text(DETACHED_PLUGIN)
    monkeypatch.setenv("SANDBOX_PLUGINS", "")
    try:
        line = error_line(capsys, "run", "--plugin", str(plugin), "--set", "estimator=r10_detached", "--no-store",
                          "--quiet")
    finally:
        from sandbox.estimators import ESTIMATORS

        sys.modules.pop("r10_detached", None)
        ESTIMATORS._entries.pop("r10_detached", None)
    assert line == ("sandbox: error: plugin estimator 'r10_detached' (r10_detached.Detached) breaks the estimator "
                    "contract on a toy batch of 2 × 6 × 3 tokens: its loss does not depend on logp (no gradient: "
                    "detached, or built from numbers)"), line


def test_item5_a_run_beyond_the_time_limit_is_one_line_naming_the_field_and_the_estimate(monkeypatch):
    """Every run's time is estimated before work (a lower bound: steps × max(0.1 ms, FLOP per step /
    the device's peak)) and refused beyond $SANDBOX_MAX_RUN_HOURS (default a week)."""
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        RunConfig(task="bandit", steps=10**10)
    assert str(err.value) == ("steps 10000000000 of task 'bandit' would take at least 278 h (steps × max(0.0001 s, "
                              "3.03e+04 FLOP per step / 2e+11 FLOP/s per core)), more than $SANDBOX_MAX_RUN_HOURS = "
                              "168 h; use fewer steps or smaller sizes")
    assert time.perf_counter() - start < 5
    monkeypatch.setenv("SANDBOX_MAX_RUN_HOURS", "0.001")  # 3.6 s: a sequence task's 10,000 steps take longer
    with pytest.raises(ValueError, match=r"^steps 10000 of task 'reverse_copy' with H=2 would take at least [\d.]+ h "
                                         r"\(steps × max\(0.0001 s, [\d.e+]+ FLOP per step / 2e\+11 FLOP/s per core\)\), "
                                         r"more than \$SANDBOX_MAX_RUN_HOURS = 0.001 h"):
        RunConfig(task="reverse_copy", task_kwargs={"H": 2}, steps=10_000)
    RunConfig(task="bandit", steps=1000)  # 0.1 s at least: within
    monkeypatch.setenv("SANDBOX_MAX_RUN_HOURS", "forever")
    with pytest.raises(ValueError, match=re.escape("$SANDBOX_MAX_RUN_HOURS must be a number of hours > 0, got 'forever'")):
        RunConfig(task="bandit", steps=999)


def test_item5_the_time_estimate_is_a_lower_bound_of_a_measured_step():
    from sandbox.runtime.loop import train
    from sandbox.tasks import make_task
    from sandbox.tasks.base import run_seconds

    for task, kwargs in (("bandit", {}), ("reverse_copy", {"H": 1, "V": 2, "width": 8, "layers": 1})):
        config = RunConfig(task=task, task_kwargs=kwargs, steps=4, log_points=1)
        start = time.perf_counter()
        train(config)
        assert (time.perf_counter() - start) / 4 > run_seconds(make_task(task, **kwargs), 1), task


def test_r8_a_config_whose_group_size_the_machine_cannot_hold_is_one_line_in_the_dry_run(tmp_path):
    """verl rollout.n 10⁸ passed the dry run with a cost line; for real, four job tracebacks after 359 s."""
    from sandbox.check.api import dry_run

    config = {"actor_rollout_ref": {"rollout": {"n": 10**8}}, "algorithm": {"adv_estimator": "grpo"}}
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        dry_run(config, results=tmp_path / "r")
    line = str(err.value)
    assert re.match(r"cell '[\w/-]+' \([^)]+\) of battery 'deployment'; the config's group size \(samples per prompt\) "
                    r"is 100000000: task_kwargs: task '\w+' with .*samples_per_prompt=100000000.* would need about "
                    r"[\d,]+ GiB of memory .*more than this machine's", line) and "\n" not in line, line
    assert time.perf_counter() - start < 60
