"""IS-PG, TIS, MIS, V-trace, M2PO: hand values, analytic gradients, on-policy equivalence."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator

from .helpers import make_toy, n_valid


def _seq_ratio(toy):
    lp = toy.logp().detach()
    return torch.exp(((lp - toy.behavior_logp) * toy.mask).sum(-1, keepdim=True))


def _token_ratio(toy):
    return torch.exp(toy.logp().detach() - toy.behavior_logp)


def _check(toy, name, weight, **kwargs):
    out = make_estimator(name, **kwargs)(toy.terms())
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=1e-12), name
    return out


# ----------------------------------------------------------------------------- hand values
def test_single_step_hand_values():
    # π = (0.5, 0.2), μ = (0.25, 0.4): w = (2, 0.5); A = (1, 1)
    logp = torch.log(torch.tensor([[0.5], [0.2]]))
    mu = torch.log(torch.tensor([[0.25], [0.4]]))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, 1.0]), behavior_logp=mu)
    l5, l2 = math.log(0.5), math.log(0.2)
    assert make_estimator("is_pg")(terms).loss.item() == pytest.approx(-(2 * l5 + 0.5 * l2) / 2)
    # TIS C = 1.5: weights (1.5, 0.5)
    assert make_estimator("tis", C=1.5)(terms).loss.item() == pytest.approx(-(1.5 * l5 + 0.5 * l2) / 2)
    # MIS α = 0.6, β = 5: 0.5 is masked → weights (2, 0)
    out = make_estimator("mis", alpha=0.6)(terms)
    assert out.loss.item() == pytest.approx(-(2 * l5) / 2)
    assert out.metrics["mask_frac"].item() == pytest.approx(0.5)
    # V-trace single step, ρ̄ = 1: weights (1, 0.5)
    assert make_estimator("vtrace_pg")(terms).loss.item() == pytest.approx(-(l5 + 0.5 * l2) / 2)


def test_sequence_level_hand_values():
    # one sequence of two tokens: π = (0.5, 0.5), μ = (0.25, 0.5): ρ = 2, s = sqrt(2)
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    mu = torch.log(torch.tensor([[0.25, 0.5]]))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0]), behavior_logp=mu)
    l5 = math.log(0.5)
    assert make_estimator("is_pg")(terms).loss.item() == pytest.approx(-2 * l5)
    assert make_estimator("tis", C=1.5, level="sequence")(terms).loss.item() == pytest.approx(-1.5 * l5)
    assert make_estimator("mis", level="sequence", beta=1.9)(terms).loss.item() == pytest.approx(0.0)
    geo = make_estimator("mis", level="sequence", geometric=True, beta=1.9)(terms)
    assert geo.loss.item() == pytest.approx(-math.sqrt(2) * l5)


# ----------------------------------------------------------------------------- analytic gradients
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_is_family_gradients_are_analytic(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.7)
    A = toy.advantages.unsqueeze(-1)
    N = n_valid(toy.mask)
    w, rho = _token_ratio(toy), _seq_ratio(toy)
    m = toy.mask
    _check(toy, "is_pg", -rho * A * m / N)
    _check(toy, "tis", -torch.clamp(w, max=2.0) * A * m / N)
    _check(toy, "tis", -torch.clamp(rho, max=1.3) * A * m / N, C=1.3, level="sequence")
    keep = (w >= 0.5) & (w <= 5.0)
    _check(toy, "mis", -w * keep * A * m / N)
    s = torch.exp(((toy.logp().detach() - toy.behavior_logp) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True))
    s_keep = (s >= 0.8) & (s <= 1.2)
    _check(toy, "mis", -s * s_keep * A * m / N, alpha=0.8, beta=1.2, level="sequence", geometric=True)


def _vtrace_reference(w, mask, adv, rho_bar, c_bar, gamma):
    """Independent numpy V-trace with V = 0, reward at the last valid token."""
    w, mask, adv = w.numpy(), mask.numpy(), adv.numpy()
    B, T = w.shape
    out = np.zeros((B, T))
    for i in range(B):
        valid = np.flatnonzero(mask[i])
        r = np.zeros(T)
        r[valid[-1]] = adv[i]
        rho = np.where(mask[i], np.minimum(rho_bar, w[i]), 1.0)
        c = np.where(mask[i], np.minimum(c_bar, w[i]), 1.0)
        v = np.zeros(T + 1)
        for s in reversed(range(T)):
            v[s] = rho[s] * r[s] + gamma * c[s] * v[s + 1]
            out[i, s] = r[s] + gamma * v[s + 1]
    return torch.from_numpy(out)


@pytest.mark.parametrize("gamma, rho_bar, c_bar", [(1.0, 1.0, 1.0), (0.9, 1.5, 0.8)])
def test_vtrace_multistep_gradient(gamma, rho_bar, c_bar):
    toy = make_toy(shape=(5, 4), seed=11, off_policy=0.6)
    w = _token_ratio(toy)
    adv_hat = _vtrace_reference(w, toy.mask, toy.advantages, rho_bar, c_bar, gamma)
    weight = -torch.clamp(w, max=rho_bar) * adv_hat * toy.mask / n_valid(toy.mask)
    _check(toy, "vtrace_pg", weight, gamma=gamma, rho_bar=rho_bar, c_bar=c_bar)


def test_vtrace_single_step_is_truncated_is():
    toy = make_toy(shape=(8, 1), seed=12, off_policy=1.0)
    a = make_estimator("vtrace_pg", rho_bar=1.7)(toy.terms())
    b = make_estimator("tis", C=1.7)(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12)


def test_m2po_keeps_smallest_second_moments():
    # M2 per token = (0.0², 0.1², 0.3², 0.5²) = (0, .01, .09, .25); τ = 0.04:
    # kept prefix means: 0, .005, .0333, .0875 → keep 3 tokens, drop the 0.5 deviation.
    logp = torch.zeros(1, 4, dtype=torch.float64)
    mu = -torch.tensor([[0.0, 0.1, 0.3, 0.5]], dtype=torch.float64)
    terms = PGTerms(logp=logp.clone().requires_grad_(True), advantages=torch.tensor([1.0], dtype=torch.float64), behavior_logp=mu)
    est = make_estimator("m2po", tau=0.04)
    assert est.keep_mask(terms).tolist() == [[True, True, True, False]]
    out = est(terms)
    assert out.metrics["mask_frac"].item() == pytest.approx(0.25)
    (grad,) = torch.autograd.grad(out.loss, terms.logp)
    w = torch.exp(-mu)  # π/μ with log π = 0
    expected = torch.where(torch.tensor([[True, True, True, False]]), -w / 3, torch.zeros(()))
    assert torch.allclose(grad, expected)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), tau=st.floats(1e-3, 1.0))
def test_m2po_kept_mean_is_within_budget(seed, tau):
    toy = make_toy(shape=(6, 4), seed=seed, off_policy=0.5)
    terms = toy.terms()
    keep = make_estimator("m2po", tau=tau).keep_mask(terms)
    m2 = (terms.logp.detach() - terms.behavior_logp).pow(2)
    if keep.any():
        assert m2[keep].mean().item() <= tau + 1e-12
    # maximality: adding the smallest dropped valid token would exceed τ
    dropped = toy.mask & ~keep
    if dropped.any():
        assert torch.cat([m2[keep], m2[dropped].min().view(1)]).mean().item() > tau - 1e-12
    assert not (keep & ~toy.mask).any()


# ----------------------------------------------------------------------------- equivalences
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_on_policy_is_family_equals_reinforce(seed, B, T):
    """μ = π_θ: IS-PG = TIS = MIS = V-trace (T=1) = M2PO = REINFORCE, in value and gradient."""
    toy = make_toy(shape=(B, T), seed=seed)
    on_policy = toy.terms(behavior_logp=toy.logp().detach())
    ref = make_estimator("reinforce")(on_policy)
    ref_grad = toy.autograd_grad(ref.loss)
    names = [("is_pg", {}), ("tis", {}), ("tis", {"level": "sequence"}), ("mis", {}),
             ("mis", {"level": "sequence", "geometric": True}), ("m2po", {})]
    if T == 1:
        names.append(("vtrace_pg", {}))
    for name, kw in names:
        out = make_estimator(name, **kw)(toy.terms(behavior_logp=toy.logp().detach()))
        assert out.loss.item() == pytest.approx(ref.loss.item(), rel=1e-12, abs=1e-12), name
        assert torch.allclose(toy.autograd_grad(out.loss), ref_grad, atol=1e-12), name
