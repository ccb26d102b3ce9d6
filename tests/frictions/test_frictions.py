"""Every friction: strength 0 is the identity bit for bit; reported vs true behaviour log-probs;
the exact marginal μ under overriding bugs; each transform's value."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sandbox.core.seeding import derived_generator
from sandbox.frictions import FRICTIONS, FrictionContext, FrictionStack, Sample, make_friction
from sandbox.frictions.actor_bugs import fake_quantize
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import metrics_only, train
from sandbox.tasks.bandits import Bandit

BANDIT = {"N": 4, "K": 5, "batch_size": 4, "samples_per_context": 5, "population": 2, "init_std": 1.0}
ZERO = {"landmine": {"p_bug": 0.0}, "logit_noise": {"sigma": 0.0}, "quantized": {"bits": 0},
        "eps_random": {"eps": 0.0}, "bernoulli_reward": {"p": 0.0}, "gaussian_reward": {"sigma": 0.0},
        "label_flip": {"p": 0.0}, "poison_token": {"penalty": 0.0}, "rare_discovery": {"p_disc": 0.0},
        "precision_mismatch": {"sampler_dtype": "off"}, "truncated_sampling": {"top_p": 1.0, "top_k": 0},
        "partial_rollouts": {"chunks": 1}, "measured_mismatch": {"token_kl": 0.0},
        "sampler_rounding": {"mantissa_bits": 0.0}}


def _run(frictions=(), **kw):
    cfg = RunConfig(task="bandit", task_kwargs=BANDIT, estimator="is_pg", advantage="group_mean", lr=0.05,
                    steps=15, log_points=6, frictions=tuple(frictions), **kw)
    return metrics_only(train(cfg))


def test_every_registered_friction_has_a_zero_strength():
    assert set(ZERO) == set(FRICTIONS.names())


@pytest.mark.parametrize("name", sorted(ZERO))
def test_strength_zero_is_identity_bit_for_bit(name):
    assert not make_friction(name, **ZERO[name]).active
    assert _run().equals(_run([(name, ZERO[name])]))


def test_active_follows_the_declared_strength_field():
    # a friction that names its strength field needs no ``active`` of its own (the README's example)
    from dataclasses import dataclass

    from sandbox.frictions import Friction

    @dataclass(frozen=True)
    class Halved(Friction):
        kind = "reward"
        strength = "p"
        p: float = 0.0

    assert not Halved().active and Halved(p=0.2).active and not FrictionStack([Halved()])
    assert Friction().active  # no strength field declared: always on

    @dataclass(frozen=True)
    class Named(Friction):
        strength: float = 0.0  # a field called ``strength`` is its own strength

    assert not Named().active and Named(strength=0.5).active
    declared = [n for n in FRICTIONS.names() if FRICTIONS.get(n).strength is not None]
    assert {"bernoulli_reward", "partial_rollouts", "quantized", "rare_discovery"} <= set(declared)
    for name in declared:
        cls = FRICTIONS.get(name)
        assert not make_friction(name, **{cls.strength: cls.identity}).active, name
        assert make_friction(name, **STRONG[name]).active, name


STRONG = {"landmine": {"p_bug": 0.3}, "logit_noise": {"sigma": 0.5}, "quantized": {"bits": 4},
          "eps_random": {"eps": 0.2}, "bernoulli_reward": {"p": 0.3}, "gaussian_reward": {"sigma": 0.3},
          "label_flip": {"p": 0.3}, "poison_token": {"penalty": 0.5}, "rare_discovery": {"p_disc": 0.3},
          "partial_rollouts": {"chunks": 2}, "sampler_rounding": {"mantissa_bits": 7}}


def _batch(frictions, n=20000, K=5, seed=0, z=None):
    task = Bandit(N=1, K=K, batch_size=n, population=1, dtype="float64", frictions=FrictionStack(frictions))
    task.init_params(derived_generator(seed, "init"))
    task.env.label_table = torch.zeros(1, 1, dtype=torch.long)
    z = torch.tensor([[[2.0, 1.0, 0.0, -1.0, -3.0]]], dtype=torch.float64) if z is None else z
    return task, collect(task, [z], 0, derived_generator(seed, "draw"), seed), torch.softmax(z[0, 0], -1)


def _empirical(rollout, K):
    return torch.bincount(rollout.actions[0, :, 0], minlength=K).double() / rollout.actions.shape[1]


@pytest.mark.parametrize("friction", [make_friction("landmine", p_bug=0.3), make_friction("rare_discovery", p_disc=0.2),
                                      make_friction("eps_random", eps=0.4), make_friction("logit_noise", sigma=1.0)])
def test_true_logp_is_the_marginal_sampling_distribution(friction):
    """exp(true_behavior_logp) of each sampled action equals its empirical frequency (20k draws)."""
    task, rollout, pi = _batch([friction])
    freq = _empirical(rollout, 5)
    true = torch.zeros(5, dtype=torch.float64)
    true[rollout.actions[0, :, 0]] = rollout.true_behavior_logp[0, :, 0].exp()
    se = torch.sqrt(true * (1 - true) / 20000)
    assert torch.all((freq - true).abs() <= 5 * se + 1e-12), (freq, true)


def test_landmine_reports_override_prob_and_wrong_answer():
    _, rollout, pi = _batch([make_friction("landmine", p_bug=0.3, override_prob=0.5)])
    wrong = 1  # (label 0 + 1) mod K
    a = rollout.actions[0, :, 0]
    reported = rollout.behavior_logp[0, :, 0]
    # every overridden row reports log 0.5; the un-overridden rows report π
    own = torch.isclose(reported, torch.log(pi)[a], rtol=0, atol=1e-12)
    assert torch.all((a == wrong) | own)
    assert torch.allclose(reported[~own], torch.full_like(reported[~own], math.log(0.5)))
    freq_wrong = (a == wrong).double().mean()
    assert abs(freq_wrong - (0.3 + 0.7 * pi[wrong])) < 0.02


def test_landmine_penalty_and_poison_token():
    _, rollout, _ = _batch([make_friction("landmine", p_bug=1.0, penalty_mean=-2.0)], n=50)
    assert torch.allclose(rollout.rewards, torch.full_like(rollout.rewards, -2.0))  # wrong answer: R = 0, −2
    # as the reference's landmine wrapper: the penalty lands on *every* answer equal to the landmine,
    # sampled ones too — here nothing is injected (p_bug = 0) and the policy samples arm 1 often
    _, rollout, _ = _batch([make_friction("landmine", p_bug=0.0, penalty_mean=-2.0)], n=400)
    a, r = rollout.actions[0, :, 0], rollout.rewards[0]
    sampled_landmine = a == 1  # (label 0 + 1) mod K
    assert sampled_landmine.sum() > 50 and torch.all(r[sampled_landmine] == -2.0)
    assert torch.all(r[~sampled_landmine] == (a[~sampled_landmine] == 0).double())
    assert make_friction("landmine", penalty_mean=-1.0).active  # a penalty acts without injections
    _, rollout, _ = _batch([make_friction("poison_token", token=0, penalty=0.5)], n=200)
    a = rollout.actions[0, :, 0]
    expected = (a == 0).double() - 0.5 * (a == 0).double()
    assert torch.allclose(rollout.rewards[0], expected)


def test_rare_discovery_reports_probability_one():
    _, rollout, pi = _batch([make_friction("rare_discovery", p_disc=0.5)], n=400,
                            z=torch.tensor([[[-5.0, 3.0, 0.0, 0.0, 0.0]]], dtype=torch.float64))
    a, reported = rollout.actions[0, :, 0], rollout.behavior_logp[0, :, 0]
    forced = (a == 0) & (reported == 0)
    assert forced.double().mean() > 0.4 and torch.all(rollout.rewards[0][a == 0] == 1)


def test_eps_random_records_the_mixture():
    _, rollout, pi = _batch([make_friction("eps_random", eps=0.4)], n=100)
    mix = torch.log(0.6 * pi + 0.4 / 5)
    assert torch.allclose(rollout.behavior_logp[0, :, 0], mix[rollout.actions[0, :, 0]])


def test_logit_noise_fixed_is_the_same_every_call_and_fresh_is_not():
    ctx = FrictionContext(n_actions=5, seed=7)
    logits = torch.zeros(3, 5)
    fixed = make_friction("logit_noise", sigma=1.0)
    a = fixed.actor_logits(logits, ctx, torch.Generator().manual_seed(0))
    b = fixed.actor_logits(logits, ctx, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and torch.equal(a[0], a[1])
    fresh = make_friction("logit_noise", sigma=1.0, fresh=True)
    c = fresh.actor_logits(logits, ctx, torch.Generator().manual_seed(0))
    assert not torch.equal(c[0], c[1]) and c.std() > 0.5


def test_fake_quantize_levels():
    w = torch.tensor([[0.0, 0.3, -1.0, 0.74]])
    q = fake_quantize(w, bits=3, population_dims=1)  # 3 levels each side: step 1/3
    assert torch.allclose(q, torch.tensor([[0.0, 1 / 3, -1.0, 2 / 3]]))
    per_member = fake_quantize(torch.tensor([[1.0, 0.4], [10.0, 4.0]]), bits=2, population_dims=1)
    assert torch.allclose(per_member, torch.tensor([[1.0, 0.0], [10.0, 0.0]]))


def test_bernoulli_and_gaussian_rewards():
    sample = Sample(torch.zeros(1, 10000, 1, dtype=torch.long), torch.zeros(1, 10000, 1), torch.zeros(1, 10000, 1))
    ctx = FrictionContext(n_actions=2, reward_range=(-1.0, 1.0))
    r = torch.full((1, 10000), 0.25)
    out = make_friction("bernoulli_reward", p=0.4).reward(r, sample, ctx, torch.Generator().manual_seed(0), {})
    changed = out != 0.25
    assert abs(changed.double().mean() - 0.4) < 0.02
    assert set(out[changed].unique().tolist()) == {-1.0, 1.0}
    noisy = make_friction("gaussian_reward", sigma=2.0).reward(r, sample, ctx, torch.Generator().manual_seed(0), {})
    assert abs((noisy - r).std() - 2.0) < 0.05


def test_label_flip():
    labels = torch.zeros(1, 10000, 1, dtype=torch.long)
    sample = Sample(torch.zeros(1, 10000, 1, dtype=torch.long), torch.zeros(1, 10000, 1), torch.zeros(1, 10000, 1))
    ctx = FrictionContext(n_actions=10, correct_actions=labels)
    out = make_friction("label_flip", p=0.3).reward(torch.ones(1, 10000), sample, ctx, torch.Generator().manual_seed(0), {})
    assert abs((out == 0).double().mean() - 0.3) < 0.02  # a flipped label never equals the true one


@pytest.mark.parametrize("name, kwargs, match", [
    ("landmine", {"p_bug": 1.5}, r"p_bug must lie in \[0.0, 1.0\]"),
    ("landmine", {"override_prob": 0.0}, r"override_prob must lie in \(0.0, 1.0\]"),
    ("logit_noise", {"sigma": -1.0}, r"sigma must lie in \[0.0, inf\]"),
    ("quantized", {"bits": 1}, r"bits must lie in \[2, 16\]"),
    ("eps_random", {"eps": 2.0}, r"eps must lie in \[0.0, 1.0\]"),
    ("rare_discovery", {"p_disc": -0.1}, r"p_disc must lie in \[0.0, 1.0\]"),
    ("nope", {}, "unknown friction 'nope'"),
])
def test_bad_friction_arguments(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_friction(name, **kwargs)


def test_frictions_compose_in_order():
    stack = FrictionStack([make_friction("eps_random", eps=1.0), make_friction("logit_noise", sigma=0.5)])
    _, rollout, _ = _batch(list(stack.frictions), n=5000)
    assert np.allclose(_empirical(rollout, 5).numpy(), 0.2, atol=0.02)  # ε = 1: uniform whatever the logits
