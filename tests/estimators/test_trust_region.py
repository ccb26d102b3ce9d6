"""PPO, decoupled PPO, GSPO, CISPO, SAPO, OPSM, PMPO: hand values, analytic gradients, ratio-1 equivalences."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator

from .helpers import grad_ok, make_toy, n_valid


def _ratio(toy, prox):
    return torch.exp(toy.logp().detach() - prox)



# ----------------------------------------------------------------------------- hand values
def test_ppo_hand_values():
    # r = (1.5, 0.5, 0.5, 5.0), A = (1, 1, −1, −1), ε = 0.2, dual clip c = 3
    # token losses: max(−1.5, −1.2) = −1.2 (clipped); max(−0.5, −0.8) = −0.5;
    #               max(0.5, 0.8) = 0.8 (clipped);   max(5, 1.2) = 5 → dual clip min(5, 3) = 3
    logp = torch.log(torch.tensor([[1.5], [0.5], [0.5], [5.0]]) * 0.1)
    prox = torch.log(torch.full((4, 1), 0.1))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, 1.0, -1.0, -1.0]), proximal_logp=prox)
    out = make_estimator("ppo")(terms)
    assert out.loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 3.0) / 4)
    assert out.metrics["clip_frac"].item() == pytest.approx(2 / 4)  # tokens 0 and 2
    assert out.metrics["dual_clip_frac"].item() == pytest.approx(1 / 4)
    no_dual = make_estimator("ppo", dual_clip=None)(terms)
    assert no_dual.loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 5.0) / 4)


def test_decoupled_ppo_hand_values():
    # π_prox/μ = k = (2, 0.5), u = π/π_prox = (1.1, 1.5), A = 1, ε = 0.2, k_max = 1.5
    # losses: 1.5·max(−1.1, −1.1) = −1.65 ; 0.5·max(−1.5, −1.2) = −0.6
    mu = torch.log(torch.tensor([[0.1], [0.2]]))
    prox = mu + torch.log(torch.tensor([[2.0], [0.5]]))
    logp = prox + torch.log(torch.tensor([[1.1], [1.5]]))
    terms = PGTerms(logp=logp, advantages=torch.ones(2), behavior_logp=mu, proximal_logp=prox)
    out = make_estimator("decoupled_ppo", k_max=1.5)(terms)
    assert out.loss.item() == pytest.approx((-1.65 - 0.6) / 2)


def test_cispo_hand_values():
    # r = (7, 0.01), ε_h = 4 → weights (5, 0.01) (no lower clip); A = (1, 2)
    prox = torch.log(torch.full((2, 1), 0.1))
    logp = prox + torch.log(torch.tensor([[7.0], [0.01]]))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, 2.0]), proximal_logp=prox)
    out = make_estimator("cispo")(terms)
    lp = logp[:, 0]
    assert out.loss.item() == pytest.approx(float(-(5 * 1 * lp[0] + 0.01 * 2 * lp[1]) / 2))
    assert out.metrics["clip_frac"].item() == pytest.approx(0.5)
    low = make_estimator("cispo", eps_low=0.5)(terms)  # lower clip at 0.5
    assert low.loss.item() == pytest.approx(float(-(5 * 1 * lp[0] + 0.5 * 2 * lp[1]) / 2))


def test_sapo_hand_values():
    # r = 1: σ(0) = ½ → loss −(4/τ)·½·A: A = 1 (τ = 1) → −2 ; A = −1 (τ = 1.05) → 2/1.05
    logp = torch.log(torch.full((2, 1), 0.3, dtype=torch.float64))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64), proximal_logp=logp.clone())
    out = make_estimator("sapo")(terms)
    assert out.loss.item() == pytest.approx((-2.0 + 2.0 / 1.05) / 2)


def test_gspo_hand_values():
    # two tokens, log π − log π_prox = (0.2, −0.1): s = exp(0.05); ε_h = 4e-4 → clipped at 1.0004 for A > 0
    prox = torch.log(torch.full((1, 2), 0.2))
    logp = prox + torch.tensor([[0.2, -0.1]])
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0]), proximal_logp=prox)
    out = make_estimator("gspo")(terms)
    assert out.loss.item() == pytest.approx(-1.0004, rel=1e-6)
    assert out.metrics["clip_frac"].item() == pytest.approx(1.0)


def test_opsm_masks_only_negative_off_policy_sequences():
    # seq 0: A < 0, mean(log μ − log π) = 1.0 > δ → masked; seq 1: A < 0, KL 0.1 → kept;
    # seq 2: A > 0, KL 1.0 → kept (positive advantages always kept)
    logp = torch.log(torch.full((3, 2), 0.2))
    mu = logp + torch.tensor([[1.0, 1.0], [0.1, 0.1], [1.0, 1.0]])
    terms = PGTerms(logp=logp, advantages=torch.tensor([-1.0, -1.0, 1.0]), behavior_logp=mu,
                    proximal_logp=logp.clone())
    est = make_estimator("opsm")
    assert est.keep_mask(terms).tolist() == [False, True, True]
    out = est(terms)
    assert out.metrics["mask_frac"].item() == pytest.approx(1 / 3)
    # r = 1: ppo loss −A per token; kept: seq1 (+1, +1), seq2 (−1, −1); denominator stays 6 tokens
    assert out.loss.item() == pytest.approx(0.0)


def test_pmpo_hand_values():
    # A = (2, −1, −3, 0); log π = (l0, l1, l2, l3); α = 0.5, β = 0
    # loss = −0.5·l0 + 0.5·(l1 + l2)/2  (the A = 0 token is in neither set)
    lp = torch.log(torch.tensor([[0.5], [0.25], [0.2], [0.9]]))
    terms = PGTerms(logp=lp, advantages=torch.tensor([2.0, -1.0, -3.0, 0.0]))
    lv = lp[:, 0]
    out = make_estimator("pmpo")(terms)
    assert out.loss.item() == pytest.approx(float(-0.5 * lv[0] + 0.5 * (lv[1] + lv[2]) / 2))
    mu = lp + 0.1
    out_kl = make_estimator("pmpo", alpha=0.3, beta=0.5)(PGTerms(logp=lp, advantages=terms.advantages, behavior_logp=mu))
    expected = -0.3 * lv[0] + 0.7 * (lv[1] + lv[2]) / 2 + 0.5 * 0.1
    assert out_kl.loss.item() == pytest.approx(float(expected))


# ----------------------------------------------------------------------------- analytic gradients
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_trust_region_gradients_are_analytic(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.4)
    g = torch.Generator().manual_seed(seed + 1)
    # a perturbed proximal policy, still log-probabilities (PGTerms refuses positive values)
    prox = (toy.logp().detach() + 0.3 * torch.randn(toy.mask.shape, generator=g, dtype=torch.float64)).clamp(max=0.0)
    def terms():
        return toy.terms(proximal_logp=prox)

    A = toy.advantages.unsqueeze(-1).expand_as(prox)
    m, N = toy.mask, n_valid(toy.mask)
    r = _ratio(toy, prox)

    # PPO: the unclipped branch is active iff −A·r ≥ −A·clip(r); then the weight is −A·r.
    for eps_low, eps_high, dual in [(0.2, 0.2, None), (0.1, 0.3, 3.0), (0.2, 0.2, 1.05)]:
        out = make_estimator("ppo", eps_low=eps_low, eps_high=eps_high, dual_clip=dual)(terms())
        unclipped = -A * r
        clipped = -A * torch.clamp(r, 1 - eps_low, 1 + eps_high)
        active = unclipped >= clipped
        if dual is not None:
            active &= ~((A < 0) & (torch.maximum(unclipped, clipped) > -dual * A))
        assert grad_ok(toy, out, -A * r * active * m / N), ("ppo", eps_low, eps_high, dual)

    # Decoupled PPO
    k = torch.exp(prox - toy.behavior_logp)
    out = make_estimator("decoupled_ppo", k_max=1.2)(terms())
    active = -A * r >= -A * torch.clamp(r, 0.8, 1.2)
    assert grad_ok(toy, out, -torch.clamp(k, max=1.2) * A * r * active * m / N)

    # CISPO
    out = make_estimator("cispo", eps_low=0.2, eps_high=0.3)(terms())
    assert grad_ok(toy, out, -torch.clamp(r, 0.8, 1.3) * A * m / N)

    # SAPO: d/dlog π of −(4/τ)σ(τ(r−1))A = −4·σ(1−σ)·r·A
    out = make_estimator("sapo")(terms())
    tau = torch.where(A > 0, torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.05, dtype=torch.float64))
    sig = torch.sigmoid(tau * (r - 1))
    assert grad_ok(toy, out, -4 * sig * (1 - sig) * r * A * m / N)

    # GSPO (seq-mean-token-mean): weight −A·s_i·1[unclipped]/(|y_i|·n_seq)
    eps = 0.05
    out = make_estimator("gspo", eps_low=eps, eps_high=eps)(terms())
    s = torch.exp(((toy.logp().detach() - prox) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True))
    active = -A * s >= -A * torch.clamp(s, 1 - eps, 1 + eps)
    n_seq = (m.sum(-1) > 0).sum()
    assert grad_ok(toy, out, -A * s * active * m / (m.sum(-1, keepdim=True) * n_seq))

    # OPSM = PPO on kept sequences
    est = make_estimator("opsm", delta=0.05, dual_clip=None)
    keep = est.keep_mask(terms()).unsqueeze(-1)
    active = -A * r >= -A * torch.clamp(r, 0.8, 1.2)
    assert grad_ok(toy, est(terms()), -A * r * active * keep * m / N)

    # PMPO with the KL term: −α/N₊ on A>0 tokens, +(1−α)/N₋ on A<0 tokens, −β/N everywhere
    out = make_estimator("pmpo", alpha=0.3, beta=0.2)(terms())
    pos, neg = m & (A > 0), m & (A < 0)
    weight = -0.3 * pos / pos.sum().clamp(min=1) + 0.7 * neg / neg.sum().clamp(min=1) - 0.2 * m / N
    assert grad_ok(toy, out, weight)


# ----------------------------------------------------------------------------- equivalences
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_ratio_one_equals_reinforce_gradient(seed, B, T):
    """At π_θ = π_prox = μ: PPO, CISPO, decoupled PPO, SAPO, OPSM and GSPO (per sequence) give
    REINFORCE's gradient."""
    toy = make_toy(shape=(B, T), seed=seed)
    anchor = toy.logp().detach()
    ref = toy.autograd_grad(make_estimator("reinforce")(toy.terms(behavior_logp=anchor)).loss)
    for name in ["ppo", "cispo", "decoupled_ppo", "sapo", "opsm"]:
        out = make_estimator(name)(toy.terms(behavior_logp=anchor, proximal_logp=anchor))
        assert torch.allclose(toy.autograd_grad(out.loss), ref, atol=1e-12), name
    ref_seq = toy.autograd_grad(
        make_estimator("reinforce", aggregation="seq-mean-token-mean")(toy.terms(behavior_logp=anchor)).loss
    )
    gspo = make_estimator("gspo")(toy.terms(behavior_logp=anchor, proximal_logp=anchor))
    assert torch.allclose(toy.autograd_grad(gspo.loss), ref_seq, atol=1e-12)


def test_proximal_defaults_to_behavior():
    toy = make_toy(seed=8, off_policy=0.4)
    a = make_estimator("ppo")(toy.terms())
    b = make_estimator("ppo")(toy.terms(proximal_logp=toy.behavior_logp))
    assert a.loss.item() == b.loss.item()


def test_decoupled_ppo_with_equal_anchor_is_ppo_without_dual_clip():
    toy = make_toy(seed=9, off_policy=0.4)
    a = make_estimator("decoupled_ppo")(toy.terms(proximal_logp=toy.behavior_logp))
    b = make_estimator("ppo", dual_clip=None)(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12)
    assert math.isfinite(a.loss.item())
