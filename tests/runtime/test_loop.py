"""The loop: logging schedule, metrics, divergence detection, run configs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from sandbox import Estimator
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import log_schedule, train

BANDIT = {"N": 4, "K": 5, "batch_size": 4, "samples_per_context": 4, "population": 3, "init_std": 1.0}


def test_log_schedule():
    sched = log_schedule(1000, 10)
    assert sched[0] == 0 and sched[-1] == 1000 and sched == sorted(set(sched))
    assert 1 in sched and len(sched) <= 12
    assert log_schedule(0, 5) == [0]


@dataclass(frozen=True)
class ExplodesMember0(Estimator):
    """Test-only: member 0's loss becomes inf from step 3 on (the 4th call)."""

    calls: list = None  # mutable counter smuggled in a frozen dataclass

    def token_loss(self, terms):
        self.calls.append(1)
        loss = -terms.token_advantages * terms.logp
        if len(self.calls) > 3:
            boom = torch.zeros_like(loss)
            boom[0] = float("inf")
            loss = loss + boom * terms.logp  # member 0's gradient becomes inf
        return loss


def test_a_diverging_member_is_frozen_and_the_others_go_on():
    from sandbox.runtime.loop import ActorLearner

    cfg = RunConfig(task="bandit", task_kwargs=BANDIT, estimator="reinforce", lr=0.1, steps=10, log_points=10)
    run = ActorLearner(cfg)
    run.estimator = ExplodesMember0(calls=[])
    frame = run.run()
    last = frame[frame.step == frame.step.max()].sort_values("member")
    assert last.diverged.tolist() == [True, False, False]
    assert np.isnan(last.error.iloc[0]) and np.isfinite(last.error.iloc[1:]).all()
    assert frame.completed_steps.iloc[0] == 10  # the run went on for the healthy members
    assert all(torch.isfinite(p).all() for p in run.params)  # frozen at its last finite parameters


def test_a_fully_diverged_run_stops_and_is_recorded():
    cfg = RunConfig(task="bandit", task_kwargs={**BANDIT, "population": 1}, estimator="is_pg", lr=1e300,
                    optimizer="sgd", steps=50, log_points=5, staleness={"kind": "fixed", "D": 3})
    frame = train(cfg)
    assert frame.diverged.iloc[-1]
    assert frame.completed_steps.iloc[0] < 50


def test_metrics_present():
    cfg = RunConfig(task="bandit", task_kwargs=BANDIT, estimator="dg", controllers=(("gac", {}), ("ess_lr", {})),
                    steps=5, log_points=5, staleness={"kind": "fixed", "D": 2})
    frame = train(cfg)
    for column in ("error", "gate_mean", "ess_frac", "grad_norm", "cos_consecutive", "cos_consecutive_update",
                   "grad_cos_prev", "lr_scale", "staleness_mean", "cos_pg", "cos_ce", "update_norm"):
        assert column in frame.columns, column
    assert len(frame) == 3 * len(log_schedule(5, 5))


def test_run_config_validation_and_roundtrip():
    cfg = RunConfig(task="bandit", estimator="dg", estimator_kwargs={"eta": 0.5}, frictions=(("landmine", {"p_bug": 0.1}),))
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.run_id == cfg.replace(label="other").run_id != cfg.replace(seed=1).run_id
    with pytest.raises(ValueError, match="proximal must be one of"):
        RunConfig(proximal="sometimes")
    with pytest.raises(ValueError, match="frictions entries must be"):
        RunConfig(frictions=("landmine",))
    with pytest.raises(ValueError, match=r"unknown RunConfig field\(s\) \['stepz'\]"):
        RunConfig.from_dict({"stepz": 3})
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        train(RunConfig(task="nope"))


def test_update_is_its_named_steps_in_order():
    # admit → loss → guard → control → step, called one by one, give update's numbers bit for bit
    from sandbox.runtime.loop import ActorLearner

    config = RunConfig(task="bandit", task_kwargs=BANDIT, estimator="tis", advantage="grpo", lr=0.1,
                       controllers=(("gac", {}),), staleness={"kind": "fixed", "D": 1}, steps=3)
    whole, parts = ActorLearner(config), ActorLearner(config)
    for step in range(3):
        expected = whole.update(step, whole.rollout(step))
        whole.publish(step + 1)
        rollout, waiting, dropped = parts.admit(step, parts.rollout(step))
        terms, out, grads = parts.loss(step, rollout)
        flat, grad_norm = parts.guard(grads)
        metrics = parts._gradient_metrics(step, rollout, out.metrics, flat, grad_norm, False)
        parts.step(*parts.control(flat, grads, terms, metrics, waiting))
        parts.publish(step + 1)
        assert dropped is None and metrics.keys() == expected.keys()
        for key in expected:
            torch.testing.assert_close(metrics[key], expected[key], rtol=0, atol=0, equal_nan=True)
        assert all(torch.equal(a, b) for a, b in zip(whole.params, parts.params))
