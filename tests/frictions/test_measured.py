"""The measured-mismatch friction (sandbox.frictions.measured): hand-computed σ, validation,
identity at 0, determinism, true μ right by construction, KL level and growth with length."""

import math

import pytest
import torch

from sandbox.core.sampling import SamplingChain
from sandbox.frictions import FrictionContext, FrictionStack, make_friction
from sandbox.frictions.measured import PUBLISHED, MeasuredMismatch, mismatch_sigma
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner

TINY = dict(H=2, width=16, heads=2, layers=1, mlp=32, prompts_per_step=3, samples_per_prompt=3, eval_prompts=4,
            eval_samples=2, population=2)


def test_sigma_by_hand():
    assert mismatch_sigma(1e-3, 2) == pytest.approx(math.sqrt(4e-3))  # ½σ²(1 − ½) = κ
    assert mismatch_sigma(1e-3, 1024) == pytest.approx(math.sqrt(2e-3 * 1024 / 1023))
    assert mismatch_sigma(0.0, 7) == 0.0
    assert PUBLISHED == {"bf16": 1e-3, "fp16": 1e-5}


@pytest.mark.parametrize("bad", [-1e-3, 1.5, math.nan])
def test_token_kl_is_validated_with_its_range(bad):
    with pytest.raises(ValueError, match=r"token_kl must lie in \[0.0, 1.0\]"):
        make_friction("measured_mismatch", token_kl=bad)


def test_zero_is_the_identity():
    assert not MeasuredMismatch().active and not FrictionStack([MeasuredMismatch(token_kl=0.0)])
    base = RunConfig(task="reverse_copy", task_kwargs=TINY, estimator="tis", steps=2, log_points=2, seed=3)
    off = ActorLearner(base.replace(frictions=(("measured_mismatch", {"token_kl": 0.0}),))).rollout(0)
    plain = ActorLearner(base).rollout(0)
    for key in ("actions", "behavior_logp", "true_behavior_logp", "rewards"):
        assert torch.equal(getattr(off, key), getattr(plain, key)), key


def test_the_hook_adds_sigma_times_fresh_normal_noise_from_the_actors_generator():
    f = MeasuredMismatch(token_kl=1e-3)
    logits = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    ctx = FrictionContext(n_actions=8)
    got = f.actor_logits(logits, ctx, torch.Generator().manual_seed(11))
    want = logits + mismatch_sigma(1e-3, 8) * torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(11))
    assert torch.equal(got, want)
    # the one sampling chain applies it: the distribution the actor samples is softmax(z + σε)
    chain = FrictionStack([f]).sampling_chain(ctx, torch.Generator().manual_seed(11))
    log_probs, _ = chain.distribution(logits)
    assert torch.allclose(log_probs, torch.log_softmax(want, -1))


def test_rollouts_are_deterministic_and_report_the_true_behaviour():
    cfg = RunConfig(task="reverse_copy", task_kwargs=TINY, estimator="tis", steps=2, log_points=2, seed=5,
                    frictions=(("measured_mismatch", {"token_kl": 0.05}),))
    a, b = ActorLearner(cfg).rollout(0), ActorLearner(cfg).rollout(0)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.behavior_logp, b.behavior_logp)
    assert torch.equal(a.behavior_logp, a.true_behavior_logp)  # reported μ = the distribution sampled
    plain = ActorLearner(cfg.replace(frictions=())).rollout(0)
    assert not torch.equal(a.behavior_logp, plain.behavior_logp)  # and it is not the policy's


def test_kl_of_a_uniform_policy_is_the_strength():
    # exact KL(μ‖π) per row for π uniform over V and μ = softmax(σε): its mean is κ to O(σ)
    kappa, V = 1e-3, 1024
    f = MeasuredMismatch(token_kl=kappa)
    mu = torch.log_softmax(f.actor_logits(torch.zeros(4000, V, dtype=torch.float64), FrictionContext(n_actions=V),
                                          torch.Generator().manual_seed(0)), -1)
    kl = (mu.exp() * (mu + math.log(V))).sum(-1)
    assert kl.mean().item() == pytest.approx(kappa, rel=0.03)


def test_sequence_log_ratio_drifts_by_kappa_per_token():
    # tokens drawn from μ, log π(a) − log μ(a) summed over T positions: mean −κT (−1 nat per 1,000 at 1e-3)
    kappa, V, T, N = 1e-3, 256, 512, 400
    f = MeasuredMismatch(token_kl=kappa)
    gen = torch.Generator().manual_seed(1)
    log_mu = torch.log_softmax(f.actor_logits(torch.zeros(N, T, V, dtype=torch.float64), FrictionContext(n_actions=V),
                                              gen), -1)
    a = torch.multinomial(log_mu.exp().reshape(-1, V), 1, generator=gen).reshape(N, T, 1)
    drift = (-math.log(V) - log_mu.gather(-1, a).squeeze(-1)).sum(-1)  # log π − log μ per sequence
    assert drift.mean().item() == pytest.approx(-kappa * T, rel=0.1)
    assert drift.std().item() == pytest.approx(mismatch_sigma(kappa, V) * math.sqrt(T), rel=0.15)


def test_sampling_chain_without_the_friction_is_untouched():
    chain = FrictionStack([]).sampling_chain(FrictionContext(n_actions=3), torch.Generator())
    assert chain == SamplingChain()
