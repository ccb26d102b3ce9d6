"""GMPO, GSPO-token, LUSPO, VESPO: hand values, analytic gradients, on-policy equivalences, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator

from .helpers import grad_ok, make_toy, n_valid

F64 = torch.float64



def _seq_stats(toy, anchor):
    """(per-token log ratio, |y_i| [B, 1], number of sequences with a valid token)."""
    m = toy.mask
    delta = (toy.logp().detach() - anchor) * m
    lengths = m.sum(-1, keepdim=True).to(F64)
    return delta, lengths, (m.sum(-1) > 0).sum()


# ----------------------------------------------------------------------------- hand values
def test_gmpo_hand_values():
    # one sequence, δ = log π − log π_prox = (0.1, 0.6), ε = 0.4 in log space
    prox = torch.log(torch.full((1, 2), 0.2, dtype=F64))
    logp = prox + torch.tensor([[0.1, 0.6]], dtype=F64)
    est = make_estimator("gmpo")
    # A = 1: 0.6 is clipped to 0.4 → ratio exp((0.1 + 0.4)/2), loss −exp(0.25)
    pos = est(PGTerms(logp=logp, advantages=torch.tensor([1.0], dtype=F64), proximal_logp=prox))
    assert pos.loss.item() == pytest.approx(-math.exp(0.25))
    assert pos.metrics["clip_frac"].item() == pytest.approx(0.5)
    # A = −1: only the lower end binds, 0.6 stays → loss +exp(0.35)
    neg = est(PGTerms(logp=logp, advantages=torch.tensor([-1.0], dtype=F64), proximal_logp=prox))
    assert neg.loss.item() == pytest.approx(math.exp(0.35))
    # A = −1 with δ = (−0.6, 0.1): −0.6 is clipped to −0.4 → loss +exp(−0.15)
    low = prox + torch.tensor([[-0.6, 0.1]], dtype=F64)
    out = est(PGTerms(logp=low, advantages=torch.tensor([-1.0], dtype=F64), proximal_logp=prox))
    assert out.loss.item() == pytest.approx(math.exp(-0.15))


def test_gspo_token_hand_values():
    # log ratio (0.2, −0.1): s = exp(0.05); per-token A = (1, −1), ε = (3e-4, 4e-4)
    # token 0: max(−s, −1.0004) = −1.0004 ; token 1: max(s, 1.0004) = s ; seq-mean-token-mean
    prox = torch.log(torch.full((1, 2), 0.2, dtype=F64))
    logp = prox + torch.tensor([[0.2, -0.1]], dtype=F64)
    terms = PGTerms(logp=logp, advantages=torch.tensor([[1.0, -1.0]], dtype=F64), proximal_logp=prox)
    out = make_estimator("gspo_token")(terms)
    assert out.loss.item() == pytest.approx((-1.0004 + math.exp(0.05)) / 2)
    assert out.metrics["clip_frac"].item() == pytest.approx(0.5)


def test_luspo_hand_values():
    # two sequences of lengths 1 and 3; seq 0 log ratio 0.5 (s = e^0.5, clipped at 1.0004 for A = 1),
    # seq 1 on-policy (s = 1): mean_i |y_i|·ℓ_i = (1·(−1.0004) + 3·(−1)) / 2
    prox = torch.log(torch.full((2, 3), 0.25, dtype=F64))
    logp = prox + torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[True, False, False], [True, True, True]])
    terms = PGTerms(logp=logp, advantages=torch.ones(2, dtype=F64), mask=mask, proximal_logp=prox)
    out = make_estimator("luspo")(terms)
    assert out.loss.item() == pytest.approx((-1.0004 - 3.0) / 2)
    assert out.metrics["clip_frac"].item() == pytest.approx(0.5)
    # GSPO weighs both sequences equally: (−1.0004 − 1)/2
    assert make_estimator("gspo")(terms).loss.item() == pytest.approx((-1.0004 - 1.0) / 2)


def test_vespo_hand_values():
    # w = 2, A = 1: φ = e³·2²·e⁻⁶ = 4e⁻³ ; w = 0.5, A = −1 (k = 3, λ = 2): φ = e²·0.125·e⁻¹ = 0.125e
    logp = torch.log(torch.tensor([[0.5], [0.2]], dtype=F64))
    mu = torch.log(torch.tensor([[0.25], [0.4]], dtype=F64))
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=F64), behavior_logp=mu)
    est = make_estimator("vespo")
    phi = est.weight(terms)[:, 0]
    assert phi.tolist() == pytest.approx([4 * math.exp(-3), 0.125 * math.e])
    out = est(terms)
    assert out.loss.item() == pytest.approx((-4 * math.exp(-3) * math.log(0.5) + 0.125 * math.e * math.log(0.2)) / 2)


def test_vespo_weight_is_one_on_policy_and_peaks_at_k_over_lambda():
    est = make_estimator("vespo", k_pos=2.0, lambda_pos=3.0)
    log_w = torch.linspace(-3, 2, 201, dtype=F64)
    logp = torch.zeros(201, 1, dtype=F64)
    terms = PGTerms(logp=logp - 4.0, advantages=torch.ones(201, dtype=F64), behavior_logp=(logp - 4.0) - log_w[:, None])
    phi = est.weight(terms)[:, 0]
    assert phi[torch.argmin(log_w.abs())].item() == pytest.approx(1.0)  # φ(1) = 1
    peak = math.exp(3.0) * (2 / 3) ** 2 * math.exp(-2.0)  # φ(k/λ)
    assert phi.max().item() <= peak + 1e-12
    assert phi.max().item() == pytest.approx(peak, rel=1e-3)


# ----------------------------------------------------------------------------- analytic gradients
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_sequence_family_gradients_are_analytic(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.4)
    m, N = toy.mask, n_valid(toy.mask)
    A = toy.advantages.unsqueeze(-1)
    prox = toy.behavior_logp
    delta, lengths, n_seq = _seq_stats(toy, prox)

    # GMPO: −Ā·ratio_i/|y_i|/n_seq on the tokens whose log ratio was not clipped
    eps = 0.1
    out = make_estimator("gmpo", eps_low=eps, eps_high=eps)(toy.terms())
    clipped = torch.where(A > 0, delta > eps, delta < -eps)
    log_ratio = (torch.where(clipped, delta.clamp(-eps, eps), delta) * m).sum(-1, keepdim=True) / lengths
    weight = -A * torch.exp(log_ratio) * ~clipped * m / (lengths * n_seq)
    assert grad_ok(toy, out, weight)

    # GSPO-token with per-token advantages
    g = torch.Generator().manual_seed(seed)
    A_tok = torch.randn(toy.mask.shape, generator=g, dtype=F64)
    s = torch.exp(delta.sum(-1, keepdim=True) / lengths)
    out = make_estimator("gspo_token", eps_low=0.05, eps_high=0.05)(toy.terms(advantages=A_tok))
    active = -A_tok * s >= -A_tok * torch.clamp(s, 0.95, 1.05)
    assert grad_ok(toy, out, -A_tok * s * active * m / (lengths * n_seq))

    # LUSPO: mean_i |y_i|·ℓ_i → −A_i·s_i·1[unclipped]/n_seq on every token
    out = make_estimator("luspo", eps_low=0.05, eps_high=0.05)(toy.terms())
    active = -A * s >= -A * torch.clamp(s, 0.95, 1.05)
    assert grad_ok(toy, out, -A * s * active * m / n_seq)

    # VESPO: −φ(ρ_i)·A per token, token-mean
    est = make_estimator("vespo")
    phi = est.weight(toy.terms())
    assert grad_ok(toy, est(toy.terms()), -phi * A * m / N)


# ----------------------------------------------------------------------------- equivalences
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_on_policy_equals_reinforce(seed, B, T):
    """At π_θ = π_prox = μ every ratio is 1: each estimator gives REINFORCE under its aggregation."""
    toy = make_toy(shape=(B, T), seed=seed)
    anchor = toy.logp().detach()
    for name in ["gmpo", "gspo_token", "luspo", "vespo"]:
        est = make_estimator(name)
        ref = make_estimator("reinforce", aggregation=est.aggregation)(toy.terms(behavior_logp=anchor))
        out = est(toy.terms(behavior_logp=anchor))
        assert torch.allclose(toy.autograd_grad(out.loss), toy.autograd_grad(ref.loss), atol=1e-12), name


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), per_token=st.booleans())
def test_gspo_token_agrees_with_gspo(seed, per_token):
    """Sanity identity: ``gspo`` already computes the token form sg(s_i)·π_θ/sg(π_θ)."""
    toy = make_toy(shape=(5, 4), seed=seed, off_policy=0.3)
    adv = torch.randn(5, 4, generator=torch.Generator().manual_seed(seed), dtype=F64) if per_token else toy.advantages
    a = make_estimator("gspo_token", eps_low=0.02, eps_high=0.03)(toy.terms(advantages=adv))
    b = make_estimator("gspo", eps_low=0.02, eps_high=0.03)(toy.terms(advantages=adv))
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12, abs=1e-12)
    assert torch.allclose(toy.autograd_grad(a.loss), toy.autograd_grad(b.loss), atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_luspo_with_sequence_mean_is_gspo(seed):
    """Sanity identity: without the length weight (seq-mean-token-mean) LUSPO is GSPO."""
    toy = make_toy(shape=(5, 4), seed=seed, off_policy=0.3)
    a = make_estimator("luspo", eps_low=0.02, eps_high=0.03, aggregation="seq-mean-token-mean")(toy.terms())
    b = make_estimator("gspo", eps_low=0.02, eps_high=0.03)(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12, abs=1e-12)
    assert torch.allclose(toy.autograd_grad(a.loss), toy.autograd_grad(b.loss), atol=1e-12)


def test_population_axis_matches_members():
    toy = make_toy(shape=(4, 3), seed=6, pop=(2,), off_policy=0.5)
    for name in ["gmpo", "gspo_token", "luspo", "vespo"]:
        est = make_estimator(name)
        joint = est(toy.terms()).loss.item()
        alone = sum(
            est(PGTerms(logp=toy.logp()[s], advantages=toy.advantages[s], mask=toy.mask[s],
                        behavior_logp=toy.behavior_logp[s])).loss.item()
            for s in range(2)
        )
        assert joint == pytest.approx(alone), name


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("gmpo", {"eps_low": -0.1}, r"eps_low must lie in \[0.0, inf\]"),
        ("gspo_token", {"eps_low": 2.0}, r"eps_low must lie in \[0.0, 1.0\]"),
        ("luspo", {"eps_high": -1.0}, r"eps_high must lie in \[0.0, inf\]"),
        ("vespo", {"lambda_pos": 0.0}, r"lambda_pos must lie in \(0.0, inf\]"),
        ("vespo", {"k_neg": -1.0}, r"k_neg must lie in \[0.0, inf\]"),
    ],
)
def test_bad_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **kwargs)


def test_luspo_needs_sequence_advantages():
    terms = PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"advantages must be per sequence, shape \(2,\), for luspo"):
        make_estimator("luspo")(terms)


def test_vespo_needs_behavior():
    with pytest.raises(ValueError, match="vespo needs behavior_logp"):
        make_estimator("vespo")(PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2)))
