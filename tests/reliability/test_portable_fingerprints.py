"""Numbers that travel (issue 46, R11): a component's fingerprint hashes its canaries' exact bytes,
which another CPU capability or BLAS path moves in the last bits; its portable fingerprint (floats
rounded to a stated grid, a tiny run's floats after its first Adam update left out) does not, and
a result made on another platform is judged by it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sandbox.jobs import fingerprints
from sandbox.jobs.canaries import portable_bytes
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]
#: a component of every kind a canary exercises (MNIST and hf_text need data or downloads: left out)
KEYS = ["estimator:dg", "estimator:ppo", "estimator:tis[level=\"sequence\"]", "advantage:group_mean",
        "controller:ess_lr", "optimizer:adam", "staleness:uniform", "task:bandit", "task:reverse_copy",
        "friction:bernoulli_reward", "friction:rare_discovery", "runtime:loop"]
PRINT = "import json,sys;from sandbox.jobs.fingerprints import fingerprint as e, portable_fingerprint as p, " \
        "path_fingerprint as q;print(json.dumps({k: [e(k), p(k), q(k)] for k in sys.argv[1:]}))"


@pytest.fixture(autouse=True)
def fresh_fingerprints():
    fingerprints.reset()
    yield
    fingerprints.reset()


def _in_subprocess(**env) -> dict:
    run = subprocess.run([sys.executable, "-c", PRINT, *KEYS], env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_portable_fingerprints_agree_under_every_cpu_capability_and_blas_path():
    here = {k: [fingerprints.fingerprint(k), fingerprints.portable_fingerprint(k), fingerprints.path_fingerprint(k)]
            for k in KEYS}
    native = torch.backends.cpu.get_cpu_capability().lower()
    others = [{"ATEN_CPU_CAPABILITY": c} for c in ("default", "avx2") if c != native] + [{"MKL_CBWR": "COMPATIBLE"}]
    for env in others:
        there = _in_subprocess(**env)
        moved = sorted(k for k in KEYS if there[k][1:] != here[k][1:])
        assert not moved, f"{env}: the portable or path fingerprints of {moved} moved"


def test_portable_bytes_round_away_last_bits_and_keep_a_change():
    x = torch.tensor([0.3, -1.7, 2.2, 0.05, float("nan"), float("inf")], dtype=torch.float32)
    assert portable_bytes(x) == portable_bytes(x * (1 + 2e-7))  # rounding (no value near a grid point here)
    assert portable_bytes(x) != portable_bytes(x * 1.01)  # a change of numbers
    y = x.double()
    assert portable_bytes(y) == portable_bytes(y * (1 + 1e-15)) != portable_bytes(y * (1 + 1e-8))
    assert portable_bytes(torch.tensor([1, 2, 3])) != portable_bytes(torch.tensor([1, 2, 4]))
    assert portable_bytes(x, floats=False) == portable_bytes(x * 2, floats=False)  # left out after an update


def _stored_job(tmp_path):
    store = ResultsStore(tmp_path)
    job = Job.training(RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=3,
                                 log_points=2, estimator="dg"))
    run_sweep([job], store, workers=1, progress=False)
    code = store.code(job.id)
    assert code["platform"] == fingerprints.platform() and code["portable"].keys() == code["fingerprints"].keys()
    return store, job, code


def _restamp(store, job, code, **changes):
    frame, meta = store.read(job.id), store.metadata(job.id)
    store.write(job.id, frame, meta, {**code, **changes})


def test_a_result_made_on_another_platform_is_judged_by_its_portable_fingerprints(tmp_path):
    store, job, code = _stored_job(tmp_path)
    other_bits = {**code["fingerprints"], "estimator:dg": "0" * 16}
    _restamp(store, job, code, fingerprints=other_bits, platform="AVX2 torch 2.13.0+cpu another CPU")
    assert run_sweep([job], store, workers=1, progress=False).skipped == 1  # the same numbers, rounded
    _restamp(store, job, code, fingerprints=other_bits, platform="AVX2 torch 2.13.0+cpu another CPU",
             portable={**code["portable"], "estimator:dg": "1" * 16})
    report = run_sweep([job], store, workers=1, progress=False)  # its numbers changed: recomputed, named
    assert report.computed == 1 and report.changed == {"estimator:dg": 1}


def test_on_its_own_platform_a_result_is_judged_by_its_exact_fingerprints(tmp_path):
    store, job, code = _stored_job(tmp_path)
    _restamp(store, job, code, fingerprints={**code["fingerprints"], "estimator:dg": "0" * 16})
    report = run_sweep([job], store, workers=1, progress=False)
    assert report.computed == 1 and report.changed == {"estimator:dg": 1}
    without = {k: v for k, v in code.items() if k not in ("portable", "platform")}  # written before issue 46
    _restamp(store, job, without, fingerprints={**code["fingerprints"], "estimator:dg": "0" * 16})
    assert run_sweep([job], store, workers=1, progress=False).changed == {"estimator:dg": 1}


def test_an_old_stamp_gains_portable_fingerprints_only_where_its_exact_ones_are_reproduced():
    keys = ["estimator:dg", "task:bandit"]
    old = {"version": "x", "numerics": 1, "fingerprints": fingerprints.fingerprints(keys)}
    stamped = fingerprints.portable_stamp(old)
    assert stamped == {**old, "portable": fingerprints.portable_fingerprints(keys), "platform": fingerprints.platform()}
    assert fingerprints.portable_stamp(stamped) is None  # nothing more to add
    assert fingerprints.portable_stamp({**old, "fingerprints": {**old["fingerprints"], "task:bandit": "0" * 16}}) is None
