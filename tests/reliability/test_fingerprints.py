"""A number-changing edit is caught by its numbers (issue 36): every result stores the numeric
fingerprints of the components its job built, and a sweep recomputes exactly the results whose
components' numbers changed, naming them; a refactor that keeps the numbers keeps every result."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.core.usage import component_key, parse_key, recording
from sandbox.estimators import ESTIMATORS
from sandbox.estimators.base import TokenLoss
from sandbox.estimators.delight import Delight
from sandbox.jobs import fingerprints
from sandbox.jobs import store as store_module
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_fingerprints():
    fingerprints.reset()
    yield
    fingerprints.reset()


def _jobs() -> list[Job]:
    base = RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=3, log_points=2)
    return [Job.training(base.replace(estimator=e, seed=s)) for e in ("dg", "reinforce") for s in (0, 1)]


def _halve_dg(monkeypatch) -> None:
    """An edit of delight.py that changes DG's numbers: its loss halved."""
    token_loss = Delight.token_loss

    def halved(self, terms):
        out = token_loss(self, terms)
        return TokenLoss(out.values / 2, out.mask, out.metrics)

    monkeypatch.setattr(Delight, "token_loss", halved)
    fingerprints.reset()


def test_a_job_records_the_components_it_built(tmp_path):
    store = ResultsStore(tmp_path)
    job = _jobs()[0]
    run_sweep([job], store, workers=1, progress=False)
    stored = store.code(job.id)["fingerprints"]
    assert {"estimator:dg", "task:bandit", "advantage:group_mean", "optimizer:adam", "staleness:none",
            "runtime:loop"} <= set(stored), stored
    assert all(len(v) == 16 for v in stored.values())


def test_halving_dgs_loss_recomputes_dgs_jobs_and_only_those_naming_dg(tmp_path, monkeypatch, caplog):
    store = ResultsStore(tmp_path)
    jobs = _jobs()
    assert run_sweep(jobs, store, workers=1, progress=False).computed == 4
    assert run_sweep(jobs, store, workers=1, progress=False).skipped == 4
    _halve_dg(monkeypatch)
    dg = {j.id for j in jobs if j.params["estimator"] == "dg"}
    with caplog.at_level(logging.WARNING, logger="sandbox.jobs.sweep"):
        report = run_sweep(jobs, store, workers=1, progress=False)
    assert (report.skipped, report.computed) == (2, 2)
    assert report.recomputed == {j: "stale" for j in dg} and report.changed == {"estimator:dg": 2}
    line = next(r.getMessage() for r in caplog.records if "numbers of" in r.getMessage())
    assert line.startswith("the numbers of estimator:dg changed (fingerprint ") and "recomputing the 2 result(s)" in line
    assert sorted(dg) == sorted(line.rsplit(": ", 1)[1].split(", "))
    assert run_sweep(jobs, store, workers=1, progress=False).skipped == 4  # made with the new numbers now


def test_a_refactor_that_keeps_the_numbers_keeps_every_result(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    jobs = _jobs()
    run_sweep(jobs, store, workers=1, progress=False)
    edited = {"version": "9.9.9", "source": "0123456789abcdef"}  # every byte and the version moved …
    monkeypatch.setattr(store_module, "code_version", lambda: edited)
    monkeypatch.setattr(store_module, "_file_hash", lambda path: "edited")
    assert run_sweep(jobs, store, workers=1, progress=False).skipped == 4  # … but no number
    monkeypatch.setattr(store_module, "NUMERICS", store_module.NUMERICS + 1)  # the hand-bumped back-up
    assert run_sweep(jobs, store, workers=1, progress=False).recomputed == {j.id: "stale" for j in jobs}


def test_a_plugin_that_replaces_a_builtin_is_another_method_in_the_store(tmp_path, monkeypatch):
    """`dg` registered over the built-in with replace=True (here with the built-in's very numbers)
    never serves the built-in later, and the built-in's results never serve it."""
    monkeypatch.setitem(ESTIMATORS._entries, "dg", Delight)  # restored after the test
    store = ResultsStore(tmp_path)
    jobs = [j for j in _jobs() if j.params["estimator"] == "dg"]
    run_sweep(jobs, store, workers=1, progress=False)

    @ESTIMATORS.register("dg", replace=True)
    @dataclass(frozen=True)
    class MyDG(Delight):
        """The built-in DG, as a plugin's."""

    report = run_sweep(jobs, store, workers=1, progress=False)  # in the same process: no reset needed
    assert report.computed == 2 and report.changed == {"estimator:dg": 2}
    ESTIMATORS._entries["dg"] = Delight
    Delight.name = "dg"
    report = run_sweep(jobs, store, workers=1, progress=False)
    assert report.computed == 2 and report.changed == {"estimator:dg": 2}


def test_component_keys_carry_the_settings_that_select_code_paths():
    from sandbox.runtime.build import build

    config = RunConfig(task="reverse_copy", task_kwargs={"H": 2, "backward": "screened", "width": 16},
                       estimator="kondo", estimator_kwargs={"pct": 0.5, "priority": "uniform"},
                       staleness={"kind": "fixed", "D": 2, "admission": "drop", "budget": 1})
    with recording() as used:  # a run's components are noted where they are built (validation notes none)
        build(config)
    assert {'task:reverse_copy[backward="screened"]', 'estimator:kondo[priority="uniform"]',
            'staleness:fixed[admission="drop"]', "runtime:loop"} <= used, used
    key = component_key("task", "mnist", {"probes": ["a", "b"], "behavior": "true"})
    assert parse_key(key) == ("task", "mnist", {"behavior": "true", "probes": ["a", "b"]})


SCRIPT = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(int(sys.argv[1]))
    from sandbox.jobs import fingerprints
    from sandbox.jobs.store import code_version
    code_version()
    keys = json.loads(sys.argv[2])
    start = time.perf_counter()
    out = fingerprints.fingerprints(keys)
    print(json.dumps({"fingerprints": out, "ms": 1e3 * (time.perf_counter() - start)}))
""")

KEYS = ["estimator:dg", "estimator:ppo", 'estimator:kondo[priority="uniform"]', "advantage:group_mean",
        "controller:gac", "optimizer:adam", 'staleness:fixed[admission="drop"]', "task:bandit",
        'task:reverse_copy[backward="screened"]', "friction:landmine", "runtime:loop"]


def test_fingerprints_are_deterministic_across_processes_thread_counts_and_order():
    runs = [subprocess.run([sys.executable, "-c", SCRIPT, threads, json.dumps(keys)], capture_output=True, text=True,
                           cwd=ROOT, timeout=300, check=True) for threads, keys in (("1", KEYS), ("2", KEYS[::-1]))]
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first["fingerprints"] == second["fingerprints"] and set(first["fingerprints"]) == set(KEYS)
    assert len(set(first["fingerprints"].values())) == len(KEYS)  # every component its own


def test_what_a_job_records_at_run_time_includes_what_its_config_builds(tmp_path):
    """The committed data were stamped with the components their run configs build
    (``static_components``, without rerunning 16 h of jobs): a job run now records at least those."""
    configs = [RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=2, estimator="dg",
                         staleness={"kind": "fixed", "D": 1}, controllers=(("gac", {}),)),
               RunConfig(task="reverse_copy", task_kwargs={"H": 2, "width": 16, "heads": 2, "layers": 1, "mlp": 16,
                                                           "prompts_per_step": 2, "samples_per_prompt": 2,
                                                           "eval_prompts": 2, "backward": "screened"},
                         estimator="kondo", estimator_kwargs={"pct": 0.5}, steps=2,
                         frictions=(("landmine", {"p_bug": 0.2}),))]
    store = ResultsStore(tmp_path)
    jobs = [Job.training(c) for c in configs]
    run_sweep(jobs, store, workers=1, progress=False)
    for job in jobs:
        recorded = set(store.code(job.id)["fingerprints"])
        found = fingerprints.static_components(job.params)
        assert found and found <= recorded, job.params
        assert {f"task:{job.params['task']}", "runtime:loop"} <= {k.partition("[")[0] for k in found}
    assert fingerprints.static_components({"n_adv": 41}) is None  # no run config: such a job is run again to know


def test_the_processes_of_one_run_compute_each_fingerprint_once(monkeypatch):
    """Inside ``shared_fingerprints`` the first process to compute a fingerprint leaves it for the
    others (workers, notebook kernels: a pretrained model's canary takes half a minute); a process
    whose components were replaced (``reset``) computes its own; the folder goes with the run."""
    import os

    monkeypatch.setattr(fingerprints, "_own_only", False)
    key = "estimator:dg"
    with fingerprints.shared_fingerprints():
        folder = Path(os.environ[fingerprints.SHARED])
        value = fingerprints.fingerprint(key)
        assert [p.read_text().split()[0] for p in folder.iterdir()] == [value]  # (exact, portable)
        child = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            from sandbox.jobs import fingerprints
            fingerprints._compute = lambda key, cls: ("computed again", "portably")
            print(fingerprints.fingerprint({key!r}), fingerprints.fingerprint("estimator:reinforce"))""")],
            capture_output=True, text=True, check=True, env=os.environ.copy())
        assert child.stdout.split(maxsplit=1) == [value, "computed again\n"]  # read what the parent left; computed the rest
        fingerprints._known.clear()
        monkeypatch.setattr(fingerprints, "_compute", lambda key, cls: ("computed again", "portably"))
        assert fingerprints.fingerprint(key) == value
        fingerprints.reset()  # a replaced component: this process no longer trusts the run's table
        assert fingerprints.fingerprint(key) == "computed again"
    assert fingerprints.SHARED not in os.environ and not folder.exists()
