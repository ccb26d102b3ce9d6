"""Locks (issue 26): a job claimed from another host is waited for with a visible warning and a
timeout, then recorded as failed with what to do; a stale lock taken over is reported at the
default verbosity."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

import pytest

from sandbox.cli import build_parser
from sandbox.jobs.store import HOST, ResultsStore
from sandbox.jobs.sweep import Job, lock_timeout_from_env, run_sweep


def tick(x: int = 0):
    return Job("tests.reliability.jobs:tick", {"x": x})


def other_host_lock(store: ResultsStore, job: Job) -> None:
    store.lock_path(job.id).write_text(json.dumps({"host": "gpu-node-7", "pid": 4242, "start": "99"}))


def messages(caplog, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_a_job_claimed_from_another_host_is_waited_for_then_given_up_with_what_to_do(tmp_path, caplog):
    store = ResultsStore(tmp_path)
    held, free = tick(0), tick(1)
    other_host_lock(store, held)
    lock = store.lock_path(held.id)
    with caplog.at_level(logging.WARNING):
        report = run_sweep([held, free], store, workers=1, progress=False, poll_seconds=0.05, lock_timeout=0.5)
    assert report.computed == 1 and store.state(free.id) == "ok"  # the other job was not held up
    (warning,) = messages(caplog, logging.WARNING)
    assert warning.startswith(f"job {held.id} is claimed by pid 4242 on host gpu-node-7 (lock {lock}, taken ")
    assert warning.endswith("; waiting up to 0.5 s for it (--lock-timeout)")
    assert report.failed[held.id].startswith("still claimed by pid 4242 on host gpu-node-7 after ")
    assert report.failed[held.id].endswith(f"s: if that host is gone, remove the lock file {lock} and rerun; if it "
                                           "is still computing, rerun later or wait longer with --lock-timeout")
    (error,) = messages(caplog, logging.ERROR)
    assert error == f"job {held.id} {report.failed[held.id]}" and "\n" not in error
    assert lock.exists()  # another host's lock is never removed by us


def test_the_job_runs_here_once_the_other_host_releases_it(tmp_path, caplog):
    store = ResultsStore(tmp_path)
    job = tick(2)
    other_host_lock(store, job)
    threading.Timer(0.5, store.lock_path(job.id).unlink).start()
    with caplog.at_level(logging.WARNING):
        report = run_sweep([job], store, workers=1, progress=False, poll_seconds=0.05, lock_timeout=60)
    assert report.ok and report.computed == 1
    assert len(messages(caplog, logging.WARNING)) == 1  # said once, not at every poll


def test_a_stale_lock_is_reported_when_it_is_taken_over(tmp_path, caplog):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    store = ResultsStore(tmp_path)
    job = tick(3)
    store.lock_path(job.id).write_text(json.dumps({"host": HOST, "pid": proc.pid, "start": None}))
    with caplog.at_level(logging.WARNING):
        report = run_sweep([job], store, workers=1, progress=False)
    assert report.computed == 1
    assert messages(caplog, logging.WARNING) == [
        f"taking over the stale lock {store.lock_path(job.id)}: its owner, pid {proc.pid} on this host, is no "
        "longer running"]


def test_the_lock_timeout_is_configurable_and_checked(monkeypatch, tmp_path):
    monkeypatch.delenv("SANDBOX_LOCK_TIMEOUT", raising=False)
    assert lock_timeout_from_env() == 600
    monkeypatch.setenv("SANDBOX_LOCK_TIMEOUT", "30")
    assert lock_timeout_from_env() == 30
    for bad in ("-1", "soon", "inf", "nan"):
        monkeypatch.setenv("SANDBOX_LOCK_TIMEOUT", bad)
        with pytest.raises(ValueError, match=f"SANDBOX_LOCK_TIMEOUT must be a number of seconds ≥ 0, got '{bad}'"):
            lock_timeout_from_env()
    for command in (["sweep"], ["reproduce"], ["score", "dg"]):
        assert build_parser().parse_args([*command, "--lock-timeout", "5"]).lock_timeout == 5.0
    with pytest.raises(ValueError, match="lock_timeout must be a number of seconds ≥ 0, got -1"):
        run_sweep([], ResultsStore(tmp_path), lock_timeout=-1)


def test_a_bad_lock_timeout_is_one_usage_line(capsys):
    from sandbox.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--lock-timeout", "-5"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("sandbox sweep: error: argument --lock-timeout: must be a number of seconds "
                                      "≥ 0, got '-5' (see sandbox sweep --help)\n")
