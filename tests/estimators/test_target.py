"""TOPR and TPO: hand values, analytic gradients, on-policy equivalences, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator
from sandbox.advantages import make_advantage

from .helpers import grad_ok, make_toy, n_valid

F64 = torch.float64



# ----------------------------------------------------------------------------- TOPR
def test_topr_hand_values():
    # π = (0.5, 0.2), μ = (0.25, 0.4): ρ = (2, 0.5)
    logp = torch.log(torch.tensor([[0.5], [0.2]], dtype=F64))
    mu = torch.log(torch.tensor([[0.25], [0.4]], dtype=F64))
    l5, l2 = math.log(0.5), math.log(0.2)
    est = make_estimator("topr")
    # A = (1, −1): success → −log 0.5 (no ratio); failure tapered by min(0.5, 1) → +0.5·log 0.2
    out = est(PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=F64), behavior_logp=mu))
    assert out.loss.item() == pytest.approx((-l5 + 0.5 * l2) / 2)
    # A = (−1, 1): failure with ρ = 2 → taper min(2, 1) = 1 → +log 0.5 ; success → −log 0.2
    out = est(PGTerms(logp=logp, advantages=torch.tensor([-1.0, 1.0], dtype=F64), behavior_logp=mu))
    assert out.loss.item() == pytest.approx((l5 - l2) / 2)
    weighted = make_estimator("topr", positive_weight=2.0, negative_weight=0.5)
    out = weighted(PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=F64), behavior_logp=mu))
    assert out.loss.item() == pytest.approx((-2 * l5 + 0.5 * 0.5 * l2) / 2)


def test_topr_sequence_and_token_levels():
    # one failed sequence with token ratios (2, 0.25): ρ = 0.5 tapers both tokens by 0.5 (paper);
    # the token level (ROLL) tapers by (1, 0.25)
    logp = torch.log(torch.tensor([[0.5, 0.1]], dtype=F64))
    mu = torch.log(torch.tensor([[0.25, 0.4]], dtype=F64))
    terms = PGTerms(logp=logp, advantages=torch.tensor([-1.0], dtype=F64), behavior_logp=mu)
    assert make_estimator("topr").taper(terms)[0].tolist() == pytest.approx([0.5, 0.5])
    assert make_estimator("topr", level="token").taper(terms)[0].tolist() == pytest.approx([1.0, 0.25])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_topr_gradient_is_analytic_and_on_policy_is_reinforce(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.6)
    A = toy.advantages.unsqueeze(-1).expand_as(toy.mask)
    m, N = toy.mask, n_valid(toy.mask)
    lp = toy.logp().detach()
    rho_tok = torch.exp(lp - toy.behavior_logp)
    rho_seq = torch.exp(((lp - toy.behavior_logp) * m).sum(-1, keepdim=True)).expand_as(m)
    for level, rho in [("sequence", rho_seq), ("token", rho_tok)]:
        est = make_estimator("topr", level=level, positive_weight=1.5, negative_weight=0.7)
        weight = torch.where(A > 0, 1.5, 0.7 * torch.clamp(rho, max=1.0))
        assert grad_ok(toy, est(toy.terms()), -weight * A * m / N), level
    anchor = toy.logp().detach()
    ref = toy.autograd_grad(make_estimator("reinforce")(toy.terms(behavior_logp=anchor)).loss)
    for level in ["sequence", "token"]:
        out = make_estimator("topr", level=level)(toy.terms(behavior_logp=anchor))
        assert torch.allclose(toy.autograd_grad(out.loss), ref, atol=1e-12), level


# ----------------------------------------------------------------------------- TPO
def _tpo_terms(p_learner, p_old, adv, group=None):
    logp = torch.log(torch.tensor(p_learner, dtype=F64)).unsqueeze(-1)
    mu = torch.log(torch.tensor(p_old, dtype=F64)).unsqueeze(-1)
    g = None if group is None else torch.tensor(group)
    return PGTerms(logp=logp, advantages=torch.tensor(adv, dtype=F64), behavior_logp=mu, group=g)


def test_tpo_hand_values():
    # one group of three single-token candidates, p_old = p_θ = (0.5, 0.3, 0.2), A = (1, 0, 0):
    # u = standardise(A) = (√2, −1/√2, −1/√2); q ∝ p·e^u = (0.89296, 0.06423, 0.04282);
    # loss = −Σ q·log p = 0.76519
    terms = _tpo_terms([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [1.0, 0.0, 0.0])
    est = make_estimator("tpo")
    assert est.target(terms).tolist() == pytest.approx([0.8929582, 0.0642251, 0.0428167], abs=1e-7)
    out = est(terms)
    assert out.loss.item() == pytest.approx(0.7651876, abs=1e-7)
    # the candidates' learner probabilities are renormalised over the group: halving them all
    # changes nothing
    half = _tpo_terms([0.25, 0.15, 0.1], [0.5, 0.3, 0.2], [1.0, 0.0, 0.0])
    assert est(half).loss.item() == pytest.approx(0.7651876, abs=1e-7)


def test_tpo_groups_are_independent_and_a_mean():
    # groups (0, 0, 1, 1): the loss is the mean of the two groups' losses computed alone
    est = make_estimator("tpo", eta=0.7)
    both = est(_tpo_terms([0.6, 0.1, 0.3, 0.2], [0.5, 0.2, 0.3, 0.3], [1.0, 0.0, 0.0, 1.0], [0, 0, 1, 1]))
    g0 = est(_tpo_terms([0.6, 0.1], [0.5, 0.2], [1.0, 0.0]))
    g1 = est(_tpo_terms([0.3, 0.2], [0.3, 0.3], [0.0, 1.0]))
    assert both.loss.item() == pytest.approx((g0.loss.item() + g1.loss.item()) / 2)
    # a group of one candidate has q = p = 1: no loss, no gradient
    single = est(_tpo_terms([0.6, 0.1, 0.3], [0.5, 0.2, 0.3], [1.0, 0.0, 5.0], [0, 0, 1]))
    assert single.loss.item() == pytest.approx(g0.loss.item() / 2)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_groups=st.integers(1, 3), size=st.integers(1, 4), T=st.integers(1, 3))
def test_tpo_gradient_is_p_minus_q(seed, n_groups, size, T):
    """∂loss/∂log π_θ(y_i) = (p^θ_i − q_i)/n_groups on every valid token of candidate i."""
    toy = make_toy(shape=(n_groups * size, T), seed=seed, off_policy=0.5)
    group = torch.arange(n_groups).repeat_interleave(size)
    est = make_estimator("tpo", eta=0.8)
    terms = toy.terms(group=group)
    q = est.target(terms)
    scores = (toy.logp().detach() * toy.mask).sum(-1)
    p = torch.zeros_like(scores)
    for g in range(n_groups):
        p[group == g] = torch.softmax(scores[group == g], -1)
    weight = ((p - q) / n_groups).unsqueeze(-1) * toy.mask
    assert grad_ok(toy, est(terms), weight)


def test_tpo_gradient_vanishes_at_the_target():
    """Proposition 1: the stationary point over the candidates is p^θ = q."""
    old = _tpo_terms([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [1.0, 0.0, 0.5])
    q = make_estimator("tpo").target(old)
    logits = torch.log(q).unsqueeze(-1).clone().requires_grad_(True)
    terms = PGTerms(logp=logits, advantages=old.advantages, behavior_logp=old.behavior_logp)
    (grad,) = torch.autograd.grad(make_estimator("tpo")(terms).loss, logits)
    assert torch.allclose(grad, torch.zeros_like(grad), atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(2, 6))
def test_tpo_large_eta_is_a_policy_gradient(seed, size):
    """On-policy, η → ∞: η·∂loss/∂log π(y_i) → −p_i·(u_i − Σ_j p_j u_j), a policy gradient on the
    standardised advantages with the p-weighted baseline (first order in 1/η)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(size, generator=g, dtype=F64)
    p = torch.softmax(logits, -1)
    adv = torch.randn(size, generator=g, dtype=F64)
    logp = torch.log(p).unsqueeze(-1).requires_grad_(True)
    eta = 1e6
    terms = PGTerms(logp=logp, advantages=adv, behavior_logp=torch.log(p).unsqueeze(-1))
    (grad,) = torch.autograd.grad(make_estimator("tpo", eta=eta)(terms).loss, logp)
    centred = adv - adv.mean()
    u = centred / centred.pow(2).mean().sqrt()
    expected = -p * (u - (p * u).sum())
    assert torch.allclose(eta * grad[:, 0], expected, atol=1e-4)


def test_tpo_is_invariant_to_the_baseline():
    """Sanity: u standardises within the group, so group_mean, grpo and raw rewards give one loss."""
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=F64)
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    p = [0.4, 0.3, 0.3, 0.2, 0.5, 0.3]
    losses = [
        make_estimator("tpo")(_tpo_terms(p, p, adv.tolist(), group.tolist())).loss.item()
        for adv in [r, make_advantage("group_mean")(r, group), make_advantage("grpo")(r, group)]
    ]
    assert losses == pytest.approx([losses[0]] * 3, rel=1e-9)


def test_tpo_without_behavior_uses_the_learner_and_population_axis():
    toy = make_toy(shape=(4, 2), seed=2, pop=(2,))
    group = torch.tensor([0, 0, 1, 1])
    est = make_estimator("tpo")
    on_policy = est(toy.terms(behavior_logp=None, group=group)).loss
    anchored = est(toy.terms(behavior_logp=toy.logp().detach(), group=group)).loss
    assert on_policy.item() == pytest.approx(anchored.item())
    joint = est(toy.terms(group=group)).loss.item()
    alone = sum(
        est(PGTerms(logp=toy.logp()[s], advantages=toy.advantages[s], mask=toy.mask[s],
                    behavior_logp=toy.behavior_logp[s], group=group)).loss.item()
        for s in range(2)
    )
    assert joint == pytest.approx(alone)


def test_capabilities():
    assert make_estimator("tpo").batch_dependent
    assert not make_estimator("topr").batch_dependent
    assert make_estimator("topr").needs_behavior and not make_estimator("tpo").needs_behavior


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("topr", {"level": "batch"}, "level must be one of"),
        ("topr", {"negative_weight": -1.0}, r"negative_weight must lie in \[0.0, inf\]"),
        ("tpo", {"eta": 0.0}, r"eta must lie in \(0.0, inf\]"),
    ],
)
def test_bad_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **kwargs)


def test_tpo_bad_input():
    with pytest.raises(ValueError, match=r"advantages must be per sequence, shape \(2,\), for tpo"):
        make_estimator("tpo")(PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2, 3)))
    with pytest.raises(ValueError, match="group ids must be non-negative"):
        make_estimator("tpo")(PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2), group=torch.tensor([0, -1])))
