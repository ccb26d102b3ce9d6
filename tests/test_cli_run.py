"""``sandbox run``: seeds, the stability report, the results store and run ids."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from sandbox.cli import main
from sandbox.cli_run import report, run_configs, run_job
from sandbox.jobs.backends import InProcess
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import TRAIN_JOB, Job, run_sweep
from sandbox.runtime.config import RunConfig
from sandbox.runtime.ray_async import AsyncConfig

BANDIT = ["--set", "task=bandit", "--set", "task_kwargs.K=5", "--set", "estimator=dg", "--set", "steps=6", "--quiet"]


def test_seeds_become_a_population_where_the_task_batches_them():
    (config,) = run_configs(RunConfig(task="bandit", seed=3), 4)
    assert config.task_kwargs["population"] == 4 and config.seed == 3
    assert run_configs(RunConfig(task="bandit"), None) == [RunConfig(task="bandit")]
    with pytest.raises(ValueError, match="contradicts task_kwargs.population=2"):
        run_configs(RunConfig(task="bandit", task_kwargs={"population": 2}), 4)


def test_seeds_become_separate_runs_for_one_model_per_run_tasks():
    configs = run_configs(RunConfig(task="hf_text", seed=5), 3)
    assert [c.seed for c in configs] == [5, 6, 7]
    assert all("population" not in c.task_kwargs for c in configs)


def test_every_task_declares_whether_its_seeds_need_one_model_each():
    from sandbox.tasks import TASKS, load_tasks
    from sandbox.tasks.base import Task

    load_tasks()
    assert Task.one_model_per_run is False  # declared on the protocol, read without a getattr default
    separate = {name for name in TASKS.names() if TASKS.get(name).one_model_per_run}
    assert "hf_text" in separate and "bandit" not in separate and "sequences" not in separate


def test_an_async_run_has_its_own_id_and_the_address_is_not_part_of_it():
    config = RunConfig(task="bandit", steps=5)
    sync = run_job(config).id
    ray = run_job(config, AsyncConfig(n_workers=2)).id
    assert ray != sync
    assert run_job(config, AsyncConfig(n_workers=2, address="auto")).id == ray
    assert run_job(config, AsyncConfig(n_workers=3)).id != ray
    stale = config.replace(staleness={"kind": "fixed", "D": 2})
    assert run_job(stale, AsyncConfig(n_workers=2)).id not in (ray, run_job(stale).id)


def test_one_seed_prints_values_not_intervals(capsys, tmp_path):
    assert main(["run", *BANDIT, "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 seed," in out and "[" not in out.split("stored:")[0]
    for line in ("  final ", "  peak ", "  drawdown "):
        assert line in out


def test_several_seeds_print_t_intervals_and_the_run_is_stored(capsys, tmp_path):
    assert main(["run", *BANDIT, "--seeds", "3", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "3 seeds (a population)" in out and "95% t-interval] over 3 seeds" in out
    assert re.search(r"  final +[\d.e-]+ \[[\d.e-]+, [\d.e-]+\]", out), out
    (job_id,) = ResultsStore(tmp_path).job_ids()
    assert f"stored: {tmp_path / job_id}.parquet" in out
    stored = ResultsStore(tmp_path).read(job_id)
    assert stored.member.nunique() == 3 and (stored.job_id == job_id).all()


def test_no_store_writes_nothing(capsys, tmp_path):
    assert main(["run", *BANDIT, "--no-store", "--results", str(tmp_path / "r")]) == 0
    assert "stored:" not in capsys.readouterr().out
    assert not (tmp_path / "r").exists()


def test_the_run_is_its_sweep_job_run_by_the_in_process_backend(capsys, tmp_path, monkeypatch):
    ran, run = [], InProcess.run
    monkeypatch.setattr(InProcess, "run", lambda self, job: ran.append(job) or run(self, job))
    assert main(["run", *BANDIT, "--results", str(tmp_path)]) == 0
    (job,) = ran
    assert job == Job.training(RunConfig(task="bandit", task_kwargs={"K": 5}, estimator="dg", steps=6))
    stored = ResultsStore(tmp_path)
    meta = stored.metadata(job.id)  # the backend's record: the job and its cost, as a sweep's
    assert meta["fn"] == TRAIN_JOB and meta["threads"] == 1 and meta["seconds"] > 0 and "cpu_seconds" in meta
    report_ = run_sweep([job], stored, workers=1, progress=False)  # a sweep finds it finished
    assert (report_.skipped, report_.computed) == (1, 0)


def test_report_by_hand():
    # two seeds of one run; the error falls then rises in seed 1: drawdown 0.2 there, 0 in seed 0
    frame = pd.DataFrame({"run_id": "r", "member": [0, 0, 1, 1], "seed": 0, "step": [0, 10, 0, 10],
                          "error": [0.9, 0.5, 0.3, 0.5], "diverged": [False, False, False, True]})
    text = report(frame, RunConfig(), ["r"])
    assert "2 seeds (a population), step 10" in text
    assert "  drawdown               0.1 [-1.171, 1.371]" in text  # mean 0.1, t(1) interval of (0, 0.2)
    assert "  diverged               1 of 2" in text
