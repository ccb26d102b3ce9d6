"""The Ray actor-learner: staleness 0 = the synchronous loop, fixed lag = simulated delay, a killed
worker is restarted without losing or double-counting a rollout, checkpoints resume exactly."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
from pathlib import Path

import pytest

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import metrics_only, train
from sandbox.runtime.ray_async import AsyncConfig, AsyncRunner, train_async

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("local_ray"),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")]

CFG = RunConfig(task="bandit", task_kwargs={"N": 4, "K": 5, "batch_size": 4, "samples_per_context": 3,
                                            "population": 2, "init_std": 1.0},
                estimator="dg", lr=0.1, steps=24, log_points=8)
STALE = CFG.replace(staleness={"kind": "fixed", "D": 2})
EXTRA = ["wall_time", "run_id", "label", "restarts", "rollouts_received", "learner_wait_seconds"]


def _numbers(frame):
    return metrics_only(frame.drop(columns=[c for c in EXTRA if c in frame.columns]))


def test_zero_staleness_is_the_synchronous_loop_bit_for_bit():
    got = train_async(CFG, AsyncConfig(n_workers=2))
    assert _numbers(got).equals(_numbers(train(CFG)))
    assert (got.staleness_max.dropna() == 0).all()


def test_fixed_lag_equals_simulated_delay():
    stale = CFG.replace(staleness={"kind": "fixed", "D": 3})  # one knob: the same config on Ray and simulated
    got = train_async(stale, AsyncConfig(n_workers=2))
    assert _numbers(got).equals(_numbers(train(stale)))


def test_bounded_mode_respects_the_budget_and_drops_nothing():
    got = train_async(STALE, AsyncConfig(n_workers=2, mode="bounded"))
    assert got.staleness_max.max() <= 2
    assert got.rollouts_received.iloc[0] == CFG.steps  # every admitted rollout was used, none dropped
    assert got.completed_steps.iloc[0] == CFG.steps


def test_broadcast_every_k_steps():
    got = train_async(CFG, AsyncConfig(n_workers=1, broadcast_every=4))
    late = got[got.step > 8]
    assert late.staleness_max.max() <= 3 and late.staleness_max.max() >= 1


def test_killed_worker_is_restarted_and_no_rollout_is_lost_or_counted_twice():
    runner = AsyncRunner(STALE, AsyncConfig(n_workers=2))
    victim = runner.worker_pids()[0]
    original = runner.rollout
    killed = []

    def rollout(step):
        if step == 8 and not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(step)
        return original(step)

    runner.rollout = rollout
    got = runner.run()
    assert killed and runner.stats.restarts >= 1
    assert sorted(runner.stats.versions) == list(range(CFG.steps))  # each step exactly one rollout
    assert _numbers(got).equals(_numbers(train(STALE)))  # the re-sampled rollout is identical


def _crash(acfg, at_step=13):
    """Run STALE until ``at_step``, then crash the driver's learner loop (checkpoints stay)."""
    runner = AsyncRunner(STALE, acfg)
    original = runner.rollout

    class Crash(Exception):
        pass

    def rollout(step):
        if step == at_step:
            raise Crash
        return original(step)

    runner.rollout = rollout
    with pytest.raises(Crash):
        runner.run()
    assert Path(acfg.checkpoint_path).is_file()


def test_checkpoint_resume_matches_an_uninterrupted_run_and_keeps_the_counters(tmp_path):
    acfg = AsyncConfig(n_workers=2, checkpoint_path=str(tmp_path / "learner.pt"), checkpoint_every=5)
    _crash(acfg)
    resumed = train_async(STALE, acfg, resume=True)
    uninterrupted = train_async(STALE, AsyncConfig(n_workers=2))
    assert _numbers(resumed).equals(_numbers(uninterrupted))
    assert resumed.rollouts_received.iloc[0] == CFG.steps  # counted before the checkpoint, and after


def test_resume_checks_the_config_against_the_checkpoint(tmp_path):
    acfg = AsyncConfig(n_workers=2, checkpoint_path=str(tmp_path / "learner.pt"), checkpoint_every=5)
    _crash(acfg)
    with pytest.raises(ValueError, match=r"config differs from the checkpoint .* in \['lr'\]"):
        train_async(STALE.replace(lr=0.2), acfg, resume=True)
    with pytest.raises(ValueError, match=r"in \['steps'\].*checkpoint: steps=24"):
        train_async(STALE.replace(steps=20), acfg, resume=True)
    longer = STALE.replace(steps=30, label="longer")  # the same run, continued further: allowed
    resumed = train_async(longer, acfg, resume=True)
    assert resumed.run_id.iloc[0] == longer.run_id and resumed.step.max() == 30
    reference = train(longer)
    last = _numbers(resumed[resumed.step == 30]).drop(columns="job_id", errors="ignore")
    assert last.equals(_numbers(reference[reference.step == 30]))


@pytest.mark.parametrize("kwargs, match", [
    ({"n_workers": 0}, r"n_workers must lie in \[1, inf\]"),
    ({"mode": "eager"}, "mode must be one of"),
    ({"broadcast_every": 0}, r"broadcast_every must lie in \[1, inf\]"),
    ({"checkpoint_every": 3}, "checkpoint_every > 0 needs checkpoint_path"),
])
def test_bad_async_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AsyncConfig(**kwargs)


def test_the_run_configs_schedule_runs_unchanged_on_ray():
    """RunConfig.staleness is the one knob: Ray realises any delay kind (and its admission) bit for
    bit like the simulated loop (what it refuses: tests/runtime/test_admission.py)."""
    stale = CFG.replace(staleness={"kind": "uniform", "D": 3, "admission": "mask", "budget": 2})
    got = train_async(stale, AsyncConfig(n_workers=2))
    assert _numbers(got).equals(_numbers(train(stale)))


def test_a_dead_address_is_refused_even_when_this_process_has_joined_ray():
    import ray

    from sandbox.core.processes import start_ray

    assert ray.is_initialized()  # local_ray
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match=f"--ray-address 127.0.0.1:{port}: no Ray cluster answers there.*ray start --head"):
        start_ray(f"127.0.0.1:{port}")
    assert start_ray() is False and ray.is_initialized()  # no address: the joined Ray is kept
