"""One config, one realised staleness: the simulated loop and the Ray runtime realise the same
delay schedule — every delay kind, with broadcast_every > 1 and with pacing — step for step.

Every realisation here is deterministic (d_t derives from (seed, t); Ray starts step t only once
version t − s_t is published), so the comparison is exact: the per-step staleness sequences, hence
their histograms, are equal, and so is every logged number. All Ray runs share one local Ray
session (its start-up is most of this file's time)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, metrics_only
from sandbox.runtime.ray_async import AsyncConfig, AsyncRunner, schedule_for

# importing ray takes seconds: the test collection of every xdist worker only asks whether it is there
pytestmark = [pytest.mark.xdist_group("ray"),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")]

STEPS = 30
BASE = RunConfig(task="bandit", task_kwargs={"N": 3, "K": 4, "batch_size": 4, "samples_per_context": 2,
                                             "population": 2}, estimator="dg", lr=0.1, steps=STEPS, log_points=4)
#: every built-in delay kind, three with a broadcast period k > 1 (one of them paced, one with k set
#: the older way, on the async config): name → (RunConfig.staleness, AsyncConfig.broadcast_every)
SCHEDULES = {
    "none": ({}, 1),
    "fixed": ({"kind": "fixed", "D": 2}, 1),
    "uniform, k=2": ({"kind": "uniform", "D": 3, "broadcast_every": 2}, 1),
    "geometric, k=4, paced": ({"kind": "geometric", "D": 6, "p": 0.3, "broadcast_every": 4, "admission": "pace",
                               "budget": 5}, 1),
    "per_actor, k=3 on the async config": ({"kind": "per_actor", "D": 3, "n_actors": 3}, 3),
}
EXTRA = ["wall_time", "run_id", "label", "restarts", "rollouts_received", "learner_wait_seconds"]


def simulated_staleness(config: RunConfig) -> list[int]:
    """s_t as the simulated loop realises it: the step minus the version stamped on its rollout."""
    learner = ActorLearner(config)
    realised = []
    for step in range(config.steps):
        rollout = learner.rollout(step)
        versions = rollout.version[rollout.mask]
        assert int(versions.min()) == int(versions.max())  # one version per batch (no partial rollouts here)
        realised.append(step - int(versions.max()))
        learner.update(step, rollout)
        learner.publish(step + 1)
    return realised


def _numbers(frame):
    return metrics_only(frame.drop(columns=[c for c in EXTRA if c in frame.columns]))


def test_simulated_and_ray_realise_the_same_staleness(local_ray):
    """For each schedule: the Ray run's per-step staleness (the version each step was sampled with)
    equals the simulated loop's, so their histograms are equal; the histogram of a random kind is
    not degenerate (the test can tell kinds apart); and every logged number is equal too."""
    from sandbox.frictions import DelaySchedule

    for name, (staleness, k) in SCHEDULES.items():
        config = BASE.replace(staleness=staleness)
        runner = AsyncRunner(config, AsyncConfig(n_workers=1, broadcast_every=k))
        frame = runner.run()
        config = runner.config  # the async config's broadcast_every is the schedule's
        assert config.staleness.get("broadcast_every", 1) == max(k, staleness.get("broadcast_every", 1)), name
        simulated = simulated_staleness(config)
        on_ray = [step - runner.stats.versions[step] for step in range(STEPS)]
        assert on_ray == simulated, name
        assert np.array_equal(np.bincount(on_ray), np.bincount(simulated)), name
        schedule = DelaySchedule.from_dict(config.staleness)
        assert simulated == [schedule.delay(t, config.seed) for t in range(STEPS)], name
        assert max(simulated) <= schedule.max_delay, name
        if staleness.get("kind") in ("uniform", "geometric") or schedule.broadcast_every > 1:
            assert len(set(simulated[schedule.max_delay:])) >= 2, name  # not a degenerate histogram
        assert _numbers(frame).equals(_numbers(ActorLearner(config).run())), name


def test_the_async_config_maps_onto_the_schedule_or_refuses_a_contradiction():
    stale = BASE.replace(staleness={"kind": "uniform", "D": 2})
    assert schedule_for(stale, AsyncConfig()) == stale
    assert schedule_for(stale, AsyncConfig(broadcast_every=2)).staleness == {"kind": "uniform", "D": 2,
                                                                              "broadcast_every": 2}
    mine = BASE.replace(staleness={"kind": "uniform", "D": 2, "broadcast_every": 4})
    assert schedule_for(mine, AsyncConfig()) == mine and schedule_for(mine, AsyncConfig(broadcast_every=4)) == mine
    with pytest.raises(ValueError, match="broadcast_every=2 contradicts staleness.broadcast_every=4"):
        schedule_for(mine, AsyncConfig(broadcast_every=2))
    assert schedule_for(stale, AsyncConfig(mode="bounded")) == stale  # the schedule's own bound: pacing
    dropping = BASE.replace(staleness={"kind": "uniform", "D": 2, "admission": "drop", "budget": 1})
    with pytest.raises(ValueError, match="mode='bounded' paces the actor.*admission='drop' filters"):
        schedule_for(dropping, AsyncConfig(mode="bounded"))
