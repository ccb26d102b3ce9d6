"""Divergence is a numerical event of one seed; an invalid config is an error (issue 13, items 2–3)."""

import math

import pytest
import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, config_columns, train


def test_one_members_nan_reward_freezes_only_that_member():
    cfg = RunConfig(task="bandit", task_kwargs={"K": 5, "batch_size": 16, "population": 3}, lr=0.1, steps=3)
    learner = ActorLearner(cfg)
    before = learner.params[0].detach().clone()
    rollout = learner.rollout(0)
    rewards = rollout.rewards.clone()
    rewards[1, 3] = math.nan
    learner.update(0, rollout.replace(rewards=rewards))
    assert learner.diverged.tolist() == [False, True, False]
    after = learner.params[0].detach()
    assert torch.equal(after[1], before[1])  # frozen at its last finite parameters
    assert not torch.equal(after[0], before[0]) and not torch.equal(after[2], before[2])
    assert torch.isfinite(after).all()


def test_an_invalid_config_raises_instead_of_being_recorded_as_diverged():
    cfg = RunConfig(task="bandit", task_kwargs={"K": 3, "mode": "exact"}, estimator="kondo",
                    advantage="constant", steps=2)
    with pytest.raises(ValueError, match="depends on the whole batch"):
        train(cfg)


def test_result_rows_carry_the_config_as_columns():
    cfg = RunConfig(task="bandit", task_kwargs={"K": 4, "population": 2}, estimator="dg", estimator_kwargs={"eta": 0.5},
                    staleness={"kind": "fixed", "D": 2}, frictions=(("eps_random", {"eps": 0.1}),), lr=0.1, steps=3)
    frame = train(cfg)
    assert (frame["estimator"] == "dg").all() and (frame["estimator_kwargs.eta"] == 0.5).all()
    assert (frame["task_kwargs.K"] == 4).all() and (frame["staleness.D"] == 2).all()
    assert (frame["frictions"] == '[["eps_random", {"eps": 0.1}]]').all()
    assert set(config_columns(cfg)) <= set(frame.columns)
