"""DG and Kondo: hand values, analytic gradients, the gate's variational form, limits, screening."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from sandbox import PGTerms, make_estimator

from .helpers import make_toy, n_valid


def _chi(toy):
    return toy.advantages.unsqueeze(-1) * (-toy.logp().detach())


# ----------------------------------------------------------------------------- hand values
def test_dg_hand_values():
    # π = (0.5, 0.1), A = (1, −1): ℓ = (log 2, log 10), χ = (log 2, −log 10)
    # η = 1, λ = 0: w = (σ(log 2), σ(−log 10)) = (2/3, 1/11)
    # loss = −(w0·1·log 0.5 + w1·(−1)·log 0.1)/2 = −(−(2/3)·log 2 + (1/11)·log 10)/2
    logp = torch.log(torch.tensor([[0.5], [0.1]]))
    out = make_estimator("dg")(PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0])))
    expected = -(-(2 / 3) * math.log(2) + (1 / 11) * math.log(10)) / 2
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.metrics["gate_mean"].item() == pytest.approx((2 / 3 + 1 / 11) / 2, rel=1e-6)


def test_dg_rare_success_amplified_rare_failure_suppressed():
    # same |A|, same π: a rare success gets a larger gate than a rare failure; a common action ≈ ½
    logp = torch.log(torch.tensor([[0.01], [0.01], [0.99]]))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0, 1.0]))
    w = make_estimator("dg").gate(terms)[:, 0]
    assert w[0] > 0.98 and w[1] < 0.02 and abs(w[2] - 0.5) < 0.01


# ----------------------------------------------------------------------------- gradients
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), eta=st.sampled_from([0.0, 0.3, 1.0, 4.0]), lam=st.floats(-1, 1),
       pop=st.sampled_from([(), (3,)]))
def test_dg_gradient_is_gate_times_reinforce(seed, eta, lam, pop):
    toy = make_toy(seed=seed, pop=pop)
    out = make_estimator("dg", eta=eta, lam=lam)(toy.terms())
    chi = _chi(toy)
    w = (chi > lam).double() if eta == 0 else torch.sigmoid((chi - lam) / eta)
    weight = -w * toy.advantages.unsqueeze(-1) * toy.mask / n_valid(toy.mask)
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=1e-12)


def test_dg_gate_is_a_stop_gradient():
    """If the gate were differentiated, ∇ would pick up A·log π·∂w/∂log π ≠ 0; it must not."""
    toy = make_toy(seed=21)
    out = make_estimator("dg", eta=0.7)(toy.terms())
    logp = toy.logp()
    A = toy.advantages.unsqueeze(-1)
    w_live = torch.sigmoid(A * (-logp) / 0.7)  # gate NOT detached
    live_loss = (-(w_live * A * logp) * toy.mask).sum() / toy.mask.sum()
    assert out.loss.item() == pytest.approx(live_loss.item(), rel=1e-12)  # same value …
    g_dg, g_live = toy.autograd_grad(out.loss), toy.autograd_grad(live_loss)
    assert not torch.allclose(g_dg, g_live, atol=1e-6)  # … different gradient
    w = torch.sigmoid(_chi(toy) / 0.7)
    expected = toy.analytic_grad(-w * A * toy.mask / n_valid(toy.mask))
    assert torch.allclose(g_dg, expected, atol=1e-12)


def test_dg_ablations_gradients():
    toy = make_toy(seed=22)
    A, m, N = toy.advantages.unsqueeze(-1), toy.mask, n_valid(toy.mask)
    ell = -toy.logp().detach()
    # additive gate input (1 − α)·A + α·ℓ
    out = make_estimator("dg", gate_input="additive", alpha=0.25)(toy.terms())
    w = torch.sigmoid(0.75 * A + 0.25 * ell)
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(-w * A * m / N), atol=1e-12)
    # surprisal clip
    out = make_estimator("dg", surprisal_clip=0.5)(toy.terms())
    w = torch.sigmoid(A * torch.clamp(ell, max=0.5))
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(-w * A * m / N), atol=1e-12)
    # whitening over the valid tokens
    out = make_estimator("dg", whiten=True)(toy.terms())
    chi = (A * ell)[m]
    z = (A * ell - chi.mean()) / torch.sqrt(chi.var(unbiased=False) + 1e-8)
    w = torch.sigmoid(z)
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(-w * A * m / N), atol=1e-12)


def test_dg_stochastic_gate_is_bernoulli_and_seeded():
    toy = make_toy(shape=(400, 1), seed=23)
    est = make_estimator("dg", stochastic=True)
    gate = lambda s: est.gate(toy.terms(generator=torch.Generator().manual_seed(s)))  # noqa: E731
    w1, w2, w3 = gate(0), gate(0), gate(1)
    assert torch.equal(w1, w2) and not torch.equal(w1, w3)
    assert set(w1.unique().tolist()) <= {0.0, 1.0}
    p = torch.sigmoid(_chi(toy))
    # mean of 400 Bernoullis is within 4 standard errors of the mean probability
    se = math.sqrt(float((p * (1 - p)).sum())) / 400
    assert abs(w1.mean().item() - p.mean().item()) < 4 * se


# ----------------------------------------------------------------------------- limits
def test_dg_large_eta_is_half_reinforce():
    toy = make_toy(seed=24)
    g_dg = toy.autograd_grad(make_estimator("dg", eta=1e9)(toy.terms()).loss)
    g_pg = toy.autograd_grad(make_estimator("reinforce")(toy.terms()).loss)
    assert torch.allclose(g_dg, 0.5 * g_pg, atol=1e-9)


def test_dg_eta_zero_is_hard_gate_and_limit_of_small_eta():
    toy = make_toy(seed=25)
    hard = make_estimator("dg", eta=0.0, lam=0.1).gate(toy.terms())
    assert torch.equal(hard, (_chi(toy) > 0.1).double())
    soft = make_estimator("dg", eta=1e-6, lam=0.1).gate(toy.terms())
    far = (_chi(toy) - 0.1).abs() > 1e-3
    assert torch.allclose(soft[far], hard[far], atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(chi=st.floats(-20, 20), eta=st.floats(0.05, 10))
def test_sigmoid_maximises_entropy_regularised_objective(chi, eta):
    """max_{w∈[0,1]} χw + ηH(w) is attained at w* = σ(χ/η) with value η·softplus(χ/η)."""

    def objective(w):
        h = -(w * np.log(w) + (1 - w) * np.log1p(-w)) if 0 < w < 1 else 0.0
        return chi * w + eta * h

    w_star = float(torch.sigmoid(torch.tensor(chi / eta, dtype=torch.float64)))
    value = eta * float(torch.nn.functional.softplus(torch.tensor(chi / eta, dtype=torch.float64)))
    if 0 < w_star < 1:
        assert objective(w_star) == pytest.approx(value, rel=1e-9, abs=1e-9)
    best = minimize_scalar(lambda w: -objective(w), bounds=(1e-12, 1 - 1e-12), method="bounded",
                           options={"xatol": 1e-12})
    assert -best.fun <= value + 1e-7
    grid = np.linspace(1e-9, 1 - 1e-9, 2001)
    assert max(objective(w) for w in grid) <= value + 1e-9
    # the gate the estimator uses is exactly this maximiser
    terms = PGTerms(logp=torch.tensor([[-1.0]], dtype=torch.float64), advantages=torch.tensor([chi], dtype=torch.float64))
    assert make_estimator("dg", eta=eta).gate(terms).item() == pytest.approx(w_star, rel=1e-12, abs=1e-300)


# ----------------------------------------------------------------------------- Kondo
def test_kondo_hand_values_and_ties():
    # χ = A·ℓ over 5 valid tokens; pct = 0.4 → k = 2; the tie at the 2nd value keeps 3 tokens.
    logp = torch.log(torch.tensor([[0.5], [0.5], [0.5], [0.25], [0.9]]))
    adv = torch.tensor([1.0, 1.0, -1.0, 2.0, 1.0])  # χ = (l2, l2, −l2, 2·l4, ·)
    terms = PGTerms(logp=logp, advantages=adv)
    est = make_estimator("kondo", pct=0.4)
    keep = est.keep_mask(terms)[:, 0].tolist()
    assert keep == [True, True, False, True, False]
    out = est(terms)
    lp = logp[:, 0]
    expected = -(lp[0] + lp[1] + 2 * lp[3]) / 5  # divided by all 5 valid tokens
    assert out.loss.item() == pytest.approx(float(expected))
    assert out.metrics["kept_frac"].item() == pytest.approx(3 / 5)
    assert out.metrics["kept_rows_frac"].item() == pytest.approx(3 / 5)


@pytest.mark.parametrize("priority", ["delight", "advantage", "surprisal", "uniform"])
def test_kondo_full_pct_is_reinforce(priority):
    toy = make_toy(seed=26)
    kw = {"generator": torch.Generator().manual_seed(0)}
    a = make_estimator("kondo", pct=1.0, priority=priority)(toy.terms(**kw))
    b = make_estimator("reinforce")(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12)
    assert torch.allclose(toy.autograd_grad(a.loss), toy.autograd_grad(b.loss), atol=1e-12)
    assert a.metrics["kept_frac"].item() == 1.0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), pct=st.floats(0.01, 1.0),
       priority=st.sampled_from(["delight", "advantage", "surprisal"]))
def test_kondo_keeps_top_fraction_and_gradient(seed, pct, priority):
    toy = make_toy(shape=(6, 4), seed=seed)
    est = make_estimator("kondo", pct=pct, priority=priority)
    terms = toy.terms()
    keep = est.keep_mask(terms)
    n = int(toy.mask.sum())
    k = math.ceil(pct * n - 1e-9)
    assert keep.sum() >= k and not (keep & ~toy.mask).any()
    prio = est.priorities(terms)
    assert prio[keep].min() >= prio[toy.mask & ~keep].max() if (toy.mask & ~keep).any() else True
    weight = -toy.advantages.unsqueeze(-1) * keep / n
    assert torch.allclose(toy.autograd_grad(est(terms).loss), toy.analytic_grad(weight), atol=1e-12)
