"""Bandit exact quantities: J, ∇J, the CE oracle, exact expected updates vs Monte Carlo."""

from __future__ import annotations

import pytest
import torch

from sandbox.advantages import make_advantage
from sandbox.core.seeding import derived_generator
from sandbox.envs.bandits import ce_oracle, exact_pg, expected_return
from sandbox.estimators import make_estimator
from sandbox.objectives import expected_update
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.learner import learner_terms
from sandbox.runtime.loop import ActorLearner
from sandbox.tasks.bandits import Bandit


def _random(S=2, N=3, K=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(S, N, K, generator=g, dtype=torch.float64), torch.randint(0, K, (S, N), generator=g)


def test_exact_pg_is_the_gradient_of_J():
    z, y = _random()
    leaf = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(expected_return(leaf, y).sum(), leaf)
    assert torch.allclose(grad * z.shape[1], exact_pg(z, y), atol=1e-12)


def test_ce_oracle_is_the_gradient_of_log_likelihood():
    z, y = _random()
    leaf = z.clone().requires_grad_(True)
    ll = torch.log_softmax(leaf, -1).gather(-1, y.unsqueeze(-1)).sum()
    (grad,) = torch.autograd.grad(ll, leaf)
    assert torch.allclose(grad, ce_oracle(z, y), atol=1e-12)


def test_expected_update_of_reinforce_is_the_exact_gradient():
    z, y = _random()
    got = expected_update(make_estimator("reinforce"), z, y)
    assert torch.allclose(got * z.shape[1], exact_pg(z, y), atol=1e-12)
    xent = expected_update(make_estimator("xent"), z, y)
    assert torch.allclose(xent * z.shape[1], ce_oracle(z, y), atol=1e-12)


@pytest.mark.parametrize("name, kwargs", [("reinforce", {}), ("dg", {"eta": 0.7}), ("tis", {"C": 1.5})])
def test_expected_update_matches_monte_carlo(name, kwargs):
    """The enumerated expectation equals the average of many sampled single-context batch
    gradients (population of 400 batches × 50 samples), within 5 standard errors."""
    K, S = 4, 400
    z = torch.tensor([[[1.0, 0.0, -0.5, 0.3]]], dtype=torch.float64)
    y = torch.zeros(1, 1, dtype=torch.long)
    est = make_estimator(name, **kwargs)
    exact = expected_update(est, z, y, baseline=0.25)[0, 0]
    task = Bandit(N=1, K=K, batch_size=50, population=S, dtype="float64")
    task.init_params(derived_generator(0, "init"))
    task.env.label_table = torch.zeros(S, 1, dtype=torch.long)
    params = [z.expand(S, 1, K).clone().requires_grad_(True)]
    rollout = collect(task, params, 0, derived_generator(0, "mc"), 0)
    terms = learner_terms(task, params, rollout, make_advantage("constant", b=0.25), None, False)
    (grad,) = torch.autograd.grad(est(terms).loss, params)
    samples = -grad[:, 0, :]
    mean, se = samples.mean(0), samples.std(0) / S**0.5
    assert torch.all((mean - exact).abs() <= 5 * se + 1e-12), (mean, exact, se)


def test_exact_mode_update_is_the_expected_update():
    cfg = RunConfig(task="bandit", task_kwargs={"N": 3, "K": 4, "population": 2, "mode": "exact", "init_std": 1.0,
                                                "dtype": "float64"},
                    estimator="dg", advantage="constant", advantage_kwargs={"b": 0.0}, optimizer="sgd", lr=1.0, steps=1)
    run = ActorLearner(cfg)
    z0 = run.params[0].detach().clone()
    run.update(0, run.rollout(0))
    moved = run.params[0].detach() - z0
    expected = expected_update(make_estimator("dg"), z0, run.task.label_table)
    assert torch.allclose(moved, expected, atol=1e-12)


def test_exact_mode_rejects_batch_baselines_and_batch_estimators():
    cfg = RunConfig(task="bandit", task_kwargs={"N": 3, "K": 4, "mode": "exact"}, estimator="reinforce",
                    advantage="group_mean", steps=1)
    run = ActorLearner(cfg)
    with pytest.raises(ValueError, match="mode='exact' needs a per-context baseline"):
        run.update(0, run.rollout(0))
    z, y = _random()
    with pytest.raises(ValueError, match="depends on the whole batch"):
        expected_update(make_estimator("kondo"), z, y)


def test_gaussian_bandit_rewards_and_regret():
    cfg = RunConfig(task="gaussian_bandit", task_kwargs={"mu": 0.9, "sigma": 1.0, "batch_size": 4000,
                                                         "dtype": "float64"}, steps=0)
    run = ActorLearner(cfg)
    r = run.rollout(0)
    a = r.actions[0, :, 0]
    assert torch.all(r.rewards[0][a == 0] == 1.0)
    gamble = r.rewards[0][a == 1]
    assert abs(gamble.mean() - 0.9) < 0.1 and abs(gamble.std() - 1.0) < 0.1
    metrics = run.evaluate(0)
    assert torch.allclose(metrics["regret"], torch.tensor([0.05], dtype=torch.float64))  # ½·(1 − 0.9)


@pytest.mark.parametrize("kwargs, match", [({"K": 1}, r"K must lie in \[2, inf\]"), ({"mode": "both"}, "mode must be one of"),
                                           ({"N": 0}, r"N must lie in \[1, inf\]")])
def test_bad_bandit_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Bandit(**kwargs)
