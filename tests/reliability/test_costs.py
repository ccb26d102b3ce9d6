"""Honest first-use costs (issue 26): a long command says before it starts how many jobs it will
run, how many are finished, and roughly how long the rest take; a first score that would take more
than 5 minutes says so and offers a comparison that fits."""

from __future__ import annotations

import re

import pytest

from sandbox.jobs import costs
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.scoring.battery import load_battery
from sandbox.scoring.recipes import make_recipe
from sandbox.scoring.runner import FIRST_LOOK_SECONDS, first_look, jobs


def tick(x: int, seed: int = 0) -> Job:
    return Job("tests.reliability.jobs:tick", {"x": x, "seed": seed})


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    monkeypatch.setattr(costs, "busy", lambda: "")


def test_a_busy_machine_is_said(monkeypatch):
    monkeypatch.undo()
    monkeypatch.setattr(costs.os, "getloadavg", lambda: (10.3, 9.0, 8.0))
    monkeypatch.setattr(costs.os, "cpu_count", lambda: 2)
    assert costs.busy() == "; the machine is busy, load 10.3 on 2 cores: expect longer"
    monkeypatch.setattr(costs.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert costs.busy() == ""


def test_a_jobs_kind_leaves_out_the_method_and_the_seed():
    config = {"task": "bandit", "steps": 100, "seed": 0, "estimator": "dg", "estimator_kwargs": {"eta": 1}}
    assert costs.kind("m:f", config) == costs.kind("m:f", {**config, "seed": 3, "estimator": "ppo",
                                                           "estimator_kwargs": {}})
    assert costs.kind("m:f", config) != costs.kind("m:f", {**config, "steps": 1000})
    assert costs.kind("m:f", {"config": config}) == costs.kind("m:f", {"config": {**config, "seed": 9}})  # nested
    assert costs.kind("m:f", config) != costs.kind("m:g", config)


def test_the_line_counts_jobs_and_estimates_from_finished_ones_of_the_same_kind(tmp_path, capsys):
    store = ResultsStore(tmp_path)
    run_sweep([tick(0, seed=0)], store, workers=1, progress=False)
    meta = store.metadata(tick(0).id)
    assert meta["cpu_seconds"] >= 0 and meta["seconds"] >= 0  # stored with every result
    store.write(tick(0).id, store.read(tick(0).id), {**meta, "cpu_seconds": 40.0})  # as if it had taken 40 s
    run_sweep([tick(0, seed=s) for s in range(4)], store, workers=2, progress=True, desc="ticks")
    first = capsys.readouterr().err.splitlines()[0]
    assert first == ("ticks: 4 jobs, 1 finished, 3 to run: about 60 s on 2 workers (from measured costs of jobs "
                     "like these)")  # 3 × 40 CPU-s over 2 workers


def test_jobs_never_measured_are_counted_and_said(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    measured = {costs.kind(tick(x).fn, tick(x).params): {"cpu_s": 400.0} for x in range(3)}
    monkeypatch.setattr(costs, "measured_table", lambda: {"kinds": measured})
    plan = costs.plan([tick(x) for x in range(4)], set(), 2, store)  # tick(3) never measured
    assert plan.line("sweep") == ("sweep: 4 jobs, 0 finished, 4 to run: about 13 min on 2 workers (from measured "
                                  "costs of jobs like these; 1 never measured, counted at the average)")
    assert costs.plan([tick(2), tick(3)], set(), 2, store).line("sweep") == (
        "sweep: 2 jobs, 0 finished, 2 to run; the time is unknown: 1 of the jobs to run were never measured")
    assert costs.plan([tick(3)], {tick(3).id}, 2, store).line("sweep") == "sweep: 1 job, 1 finished, 0 to run"
    fallback = costs.plan([tick(3)], set(), 1, store, fallback={tick(3).id: 30.0})  # e.g. its figure's average job
    assert fallback.seconds == 30.0 and fallback.unmeasured == 0


def test_a_cold_first_score_says_so_and_offers_a_comparison_that_fits(tmp_path, monkeypatch):
    battery = load_battery("quick")
    recipes = [(make_recipe("dppo"), ())] + [(make_recipe(m), ()) for m in ("reinforce", "is_pg", "tis", "ppo")]
    cell_cost = 20.0  # CPU-s of every cell: 300 s per method, 150 s on 2 workers
    monkeypatch.setattr(costs, "measured_table", lambda: {"kinds": {
        costs.kind(j.fn, j.params): {"cpu_s": cell_cost} for j in jobs(battery, recipes[0][0])}})
    store = ResultsStore(tmp_path)
    all_jobs = [j for r, p in recipes for j in jobs(battery, r, p)]
    plan = costs.plan(all_jobs, set(), 2, store)
    assert plan.seconds == pytest.approx(5 * 15 * cell_cost / 2) and plan.seconds > FIRST_LOOK_SECONDS
    assert first_look(plan, set(), battery, recipes, store, 2) == (
        "score quick: 75 jobs, 0 finished, 75 to run: about 12 min on 2 workers (from measured costs of jobs like "
        "these)\nscore quick: that is more than the 5 minutes of a first look; for one, compare with fewer "
        "methods: --against reinforce (30 jobs to run, about 5.0 min). Finished jobs are kept: the full comparison "
        "later runs only the rest")
    cached = {j.id for r, p in recipes[1:] for j in jobs(battery, r, p)}  # the built-ins done: 2.5 min
    assert first_look(costs.plan(all_jobs, cached, 2, store), cached, battery, recipes, store, 2) == (
        "score quick: 75 jobs, 60 finished, 15 to run: about 2.5 min on 2 workers (from measured costs of jobs like "
        "these)")


def test_a_new_users_first_quick_score_is_measured_and_offers_the_faster_path(tmp_path):
    """Every cell of `quick` has a measured cost (job_costs.json: a cold `sandbox score dppo` on the
    shared 2-core machine); scoring one estimator against the seven built-ins cold is more than 5
    minutes, and the comparison offered fits in them."""
    from sandbox.scoring.recipes import DEFAULT_AGAINST

    battery, store = load_battery("quick"), ResultsStore(tmp_path)
    recipes = [(make_recipe("dppo"), ())] + [(make_recipe(m), ()) for m in DEFAULT_AGAINST]
    all_jobs = [j for r, p in recipes for j in jobs(battery, r, p)]
    plan = costs.plan(all_jobs, set(), 2, store)
    assert plan.unmeasured == 0 and plan.total == 120, "a cell changed: measure it again (benchmarks/job_costs.py)"
    assert 10 * 60 < plan.seconds < 25 * 60  # 2,001 CPU-s measured: about 16 min on 2 idle cores
    line, offer = first_look(plan, set(), battery, recipes, store, 2).split("\n")
    match = re.fullmatch(r"score quick: that is more than the 5 minutes of a first look; for one, compare with fewer "
                         r"methods: --against ([\w,]+) \((\d+) jobs to run, about ([\d.]+) min\)\. Finished jobs are "
                         r"kept: the full comparison later runs only the rest", offer)
    assert match and float(match[3]) <= 5.0, offer


def test_finished_jobs_are_judged_from_the_schema_alone(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    done, other, missing = tick(5), tick(6), tick(7)
    run_sweep([done, other], store, workers=1, progress=False)
    store.write(other.id, store.read(other.id), store.metadata(other.id), code={"version": "0.0.1", "source": "x"})
    assert [store.quick_state(j.id) for j in (done, other, missing)] == ["ok", "stale", "missing"]
    assert [store.state(j.id) for j in (done, other, missing)] == ["ok", "stale", "missing"]
    assert costs.finished_ids([done, other, missing], store) == {done.id}
    # a restored committed result is kept whatever code made it (reproduce's cost line counted it to run)
    assert costs.finished_ids([done, other, missing], store, kept={other.id, missing.id}) == {done.id, other.id}
    monkeypatch.setenv("SANDBOX_ACCEPT_STALE_CODE", "1")
    assert costs.finished_ids([done, other, missing], store) == {done.id, other.id}
