"""DPPO, two-sided clipping, SAT, rollout rejection sampling: hand values, analytic gradients,
on-policy equivalences, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator

from .helpers import grad_ok, make_toy, n_valid


def _single_token(p, anchor, adv, **extra):
    """B single-token sequences with learner probs p and anchor (μ) probs."""
    logp = torch.log(torch.tensor(p, dtype=torch.float64)).unsqueeze(-1)
    mu = torch.log(torch.tensor(anchor, dtype=torch.float64)).unsqueeze(-1)
    return PGTerms(logp=logp, advantages=torch.tensor(adv, dtype=torch.float64), behavior_logp=mu, **extra)


# ----------------------------------------------------------------------------- hand values
def test_dppo_hand_values():
    # μ = 0.5 everywhere; π = (0.8, 0.6, 0.2, 0.45), A = (1, 1, −1, −1), δ = 0.2:
    # Δπ = (0.3, 0.1, −0.3, −0.05) → token 0 (A>0, Δ > 0.2) and token 2 (A<0, Δ < −0.2) dropped.
    # r = (1.6, 1.2, 0.4, 0.9): kept losses −1.2 and +0.9; the normaliser keeps all 4 tokens.
    terms = _single_token([0.8, 0.6, 0.2, 0.45], [0.5] * 4, [1.0, 1.0, -1.0, -1.0])
    out = make_estimator("dppo", kl_coef=0.0)(terms)
    assert out.loss.item() == pytest.approx((-1.2 + 0.9) / 4)
    assert out.metrics["mask_frac"].item() == pytest.approx(0.5)
    assert out.metrics["mask_high_frac"].item() == pytest.approx(0.25)
    assert out.metrics["mask_low_frac"].item() == pytest.approx(0.25)
    # prime-rl's default adds τ·(log r)² on every token, τ = 1e-3
    sq = sum(math.log(r) ** 2 for r in [1.6, 1.2, 0.4, 0.9])
    assert make_estimator("dppo")(terms).loss.item() == pytest.approx((-1.2 + 0.9) / 4 + 1e-3 * sq / 4)


def test_two_sided_ppo_hand_values():
    # r = (5, 5, 0.5), A = (−1, 1, −1), δ = 4, ε = 0.2:
    # −min(min(5,4)·(−1), 1.2·(−1)) = 4 ; −min(4·1, 1.2·1) = −1.2 ; −min(−0.5, −0.8) = 0.8
    terms = _single_token([0.5, 0.5, 0.05], [0.1, 0.1, 0.1], [-1.0, 1.0, -1.0])
    out = make_estimator("two_sided_ppo")(terms)
    assert out.loss.item() == pytest.approx((4.0 - 1.2 + 0.8) / 3)
    assert out.metrics["delta_frac"].item() == pytest.approx(1 / 3)


def test_sat_hand_values():
    # r = π/π_prox = 1.1 for all three tokens, A = 1; staleness s = |log π − log μ| = (0, 0.1, 0.3).
    # quantile 0.5 → τ = 0.1; κ = (1, 1, exp(−(0.2/0.1)²) = e⁻⁴).
    # Tokens 0, 1: 1.1 < 1.2 → −1.1 ; token 2: upper end 1 + 0.2·e⁻⁴ < 1.1 → −(1 + 0.2·e⁻⁴).
    logp = torch.log(torch.full((3, 1), 0.3, dtype=torch.float64))
    prox = logp - math.log(1.1)
    mu = logp - torch.tensor([[0.0], [0.1], [0.3]], dtype=torch.float64)
    terms = PGTerms(logp=logp, advantages=torch.ones(3, dtype=torch.float64), behavior_logp=mu, proximal_logp=prox)
    est = make_estimator("sat", quantile=0.5, bandwidth=0.1)
    kappa = est.contraction(terms)[:, 0]
    assert torch.allclose(kappa, torch.tensor([1.0, 1.0, math.exp(-4.0)], dtype=torch.float64))
    out = est(terms)
    assert out.loss.item() == pytest.approx((-1.1 - 1.1 - (1 + 0.2 * math.exp(-4.0))) / 3)
    assert out.metrics["contracted_frac"].item() == pytest.approx(1 / 3)
    ppo = make_estimator("ppo", dual_clip=None)(terms)
    assert ppo.loss.item() == pytest.approx(-1.1)  # PPO alone leaves token 2 unclipped


def test_rollout_rs_statistics_hand_values():
    # log w = log π − log μ = [[0.1, −0.1], [0.5, 0.0]]
    logp = torch.log(torch.full((2, 2), 0.2, dtype=torch.float64))
    log_w = torch.tensor([[0.1, -0.1], [0.5, 0.0]], dtype=torch.float64)
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, 2.0], dtype=torch.float64), behavior_logp=logp - log_w)
    k3 = lambda x: math.exp(x) - 1 - x  # noqa: E731
    # seq_mean k3: (k3(.1)+k3(−.1))/2 = 0.00500 ≤ 0.01 kept; (k3(.5)+0)/2 = 0.0744 rejected
    est = make_estimator("rollout_rs", loss="reinforce")
    assert est.statistic_values(terms).tolist() == pytest.approx([(k3(0.1) + k3(-0.1)) / 2, k3(0.5) / 2])
    assert est.keep_mask(terms).tolist() == [[True, True], [False, False]]
    out = est(terms)  # reinforce on the kept tokens only (rejected leave the normaliser): −A·log π
    assert out.loss.item() == pytest.approx(-math.log(0.2))
    assert out.metrics["reject_frac"].item() == pytest.approx(0.5)
    assert out.metrics["reject_seq_frac"].item() == pytest.approx(0.5)
    # token k2 = ½x² = (0.005, 0.005, 0.125, 0): upper 0.01 rejects token (1, 0) only
    tok = make_estimator("rollout_rs", statistic="k2", level="token")
    assert tok.keep_mask(terms).tolist() == [[True, True], [False, True]]
    # seq_max k2: (0.005, 0.125); upper 0.1 rejects sequence 1
    mx = make_estimator("rollout_rs", statistic="k2", level="seq_max", upper=0.1)
    assert mx.keep_mask(terms).tolist() == [[True, True], [False, False]]
    # seq_sum k1 = Σ −log w = (0, −0.5): bounds [1/2, 2] keep both; [1/1.5, 1.5] reject sequence 1
    wide = make_estimator("rollout_rs", statistic="k1", level="seq_sum", upper=2.0, lower=0.5)
    assert wide.keep_mask(terms).all()
    narrow = make_estimator("rollout_rs", statistic="k1", level="seq_sum", upper=1.5)
    assert narrow.keep_mask(terms).tolist() == [[True, True], [False, False]]


def test_rollout_rs_dual_clip_hand_values():
    # token level, k3 ≤ 2 keeps all three: k3(log 4) = 4 − 1 − log 4 = 1.61, k3(log ½) = 0.19,
    # k3(log 1.1) = 0.0047. r = (4, 0.5, 1.1), A = (−1, −1, 1), ε = 0.2, c = 3:
    # max(4, 1.2) = 4 → min(4, 3) = 3 ; max(0.5, 0.8) = 0.8 (< 3) ; max(−1.1, −1.1) = −1.1
    terms = _single_token([0.4, 0.05, 0.11], [0.1, 0.1, 0.1], [-1.0, -1.0, 1.0])
    est = make_estimator("rollout_rs", level="token", upper=2.0)
    assert est.keep_mask(terms).all()
    out = est(terms)
    assert out.loss.item() == pytest.approx((3.0 + 0.8 - 1.1) / 3)
    assert out.metrics["dual_clip_frac"].item() == pytest.approx(1 / 3)
    assert out.metrics["clip_frac"].item() == pytest.approx(1 / 3)
    # without the dual clip (the behaviour before verl's c was applied) the first token costs 4
    off = make_estimator("rollout_rs", level="token", upper=2.0, dual_clip=None)(terms)
    assert off.loss.item() == pytest.approx((4.0 + 0.8 - 1.1) / 3)


def test_rollout_rs_dual_clip_zeroes_the_verl_counterexample():
    """verl's preset (k3, seq_mean ≤ 0.01) keeps a 200-token sequence whose first token has r = 4,
    A = −1: k3 mean = (4 − 1 − log 4)/200 = 0.0081. verl's gradient on that token is 0 (the loss is
    the constant c·|A| = 3); without the dual clip it is −A·r/N = 4/200 = 0.02."""
    T = 200
    mu = torch.full((1, T), math.log(0.1), dtype=torch.float64)
    logp = mu.clone()
    logp[0, 0] = math.log(0.4)
    logp.requires_grad_(True)
    terms = PGTerms(logp=logp, advantages=torch.tensor([-1.0], dtype=torch.float64), behavior_logp=mu)
    est = make_estimator("rollout_rs")
    assert est.statistic_values(terms).item() == pytest.approx((3 - math.log(4)) / T)
    assert est.keep_mask(terms).all()
    (grad,) = torch.autograd.grad(est(terms).loss, logp)
    assert grad[0, 0].item() == 0.0
    assert torch.allclose(grad[0, 1:], torch.full((T - 1,), 1 / T, dtype=torch.float64))  # −A·r/N at r = 1
    (old,) = torch.autograd.grad(make_estimator("rollout_rs", dual_clip=None)(terms).loss, logp)
    assert old[0, 0].item() == pytest.approx(0.02)


# ----------------------------------------------------------------------------- analytic gradients
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_masked_family_gradients_are_analytic(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.5)
    A = toy.advantages.unsqueeze(-1).expand_as(toy.mask)
    m, N = toy.mask, n_valid(toy.mask)
    lp = toy.logp().detach()
    r = torch.exp(lp - toy.behavior_logp)

    # DPPO with its KL: −keep·A·r + τ·(log π − log μ)²  →  weight −keep·A·r + 2τ·(log π − log μ)
    est = make_estimator("dppo", delta_low=0.05, delta_high=0.05, kl_coef=0.3)
    keep = est.keep_mask(toy.terms())
    assert grad_ok(toy, est(toy.terms()), (-(keep * A * r) + 0.6 * (lp - toy.behavior_logp)) * m / N)

    # two-sided: the unclipped branch min(r, δ)·A is active and r < δ
    delta = 1.5
    out = make_estimator("two_sided_ppo", delta=delta)(toy.terms())
    active = (-A * torch.clamp(r, max=delta) >= -A * torch.clamp(r, 0.8, 1.2)) & (r < delta)
    assert grad_ok(toy, out, -A * r * active * m / N)

    # SAT: PPO with the per-token interval
    est = make_estimator("sat", quantile=0.5, bandwidth=0.2)
    kappa = est.contraction(toy.terms())
    lo = torch.where(A > 0, 1 - 0.2 * torch.ones_like(kappa), 1 - 0.2 * kappa)
    hi = torch.where(A > 0, 1 + 0.2 * kappa, 1 + 0.2 * torch.ones_like(kappa))
    active = -A * r >= -A * torch.minimum(torch.maximum(r, lo), hi)
    assert grad_ok(toy, est(toy.terms()), -A * r * active * m / N)

    # rollout_rs: the chosen loss over the kept tokens, normalised by their count; ppo_clip's
    # unclipped branch is live unless PPO clips it or, for A < 0, the dual clip caps it at c·|A|
    for loss, c, upper in [("reinforce", 3.0, 0.05), ("ppo_clip", None, 0.05), ("ppo_clip", 3.0, 1.0),
                           ("ppo_clip", 1.3, 1.0)]:
        est = make_estimator("rollout_rs", statistic="k3", level="token", upper=upper, loss=loss, dual_clip=c)
        keep = est.keep_mask(toy.terms())
        n_keep = keep.sum().clamp(min=1)
        ppo = torch.maximum(-A * r, -A * torch.clamp(r, 0.8, 1.2))
        live = (-A * r >= -A * torch.clamp(r, 0.8, 1.2)) & ~((A < 0) & (ppo > -(c or math.inf) * A))
        weight = -A if loss == "reinforce" else -A * r * live
        assert grad_ok(toy, est(toy.terms()), weight * keep / n_keep), (loss, c)


# ----------------------------------------------------------------------------- equivalences
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_on_policy_equals_reinforce(seed, B, T):
    """At π_θ = π_prox = μ nothing is masked, clipped or rejected and the KL has zero gradient."""
    toy = make_toy(shape=(B, T), seed=seed)
    anchor = toy.logp().detach()
    ref = toy.autograd_grad(make_estimator("reinforce")(toy.terms(behavior_logp=anchor)).loss)
    for name in ["dppo", "two_sided_ppo", "sat", "rollout_rs"]:
        out = make_estimator(name)(toy.terms(behavior_logp=anchor))
        assert torch.allclose(toy.autograd_grad(out.loss), ref, atol=1e-12), name
    rs = make_estimator("rollout_rs", statistic="k1", level="seq_sum", upper=1.01, loss="reinforce")
    assert torch.allclose(toy.autograd_grad(rs(toy.terms(behavior_logp=anchor)).loss), ref, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), c=st.floats(1.05, 6.0))
def test_rollout_rs_dual_clip_equivalences(seed, c):
    """c = ∞ (or None) is the loss without a dual clip, values and gradients; when nothing is
    rejected, ppo_clip with dual clip c is ``ppo`` with ``dual_clip=c`` (π_prox = μ)."""
    toy = make_toy(shape=(5, 3), seed=seed, off_policy=1.0)
    kw = dict(level="token", upper=1e9)
    none = make_estimator("rollout_rs", dual_clip=None, **kw)(toy.terms())
    inf = make_estimator("rollout_rs", dual_clip=math.inf, **kw)(toy.terms())
    ppo_plain = make_estimator("ppo", dual_clip=None)(toy.terms())
    ref = toy.autograd_grad(ppo_plain.loss)
    for a in (none, inf):
        assert a.loss.item() == pytest.approx(ppo_plain.loss.item(), rel=1e-12, abs=1e-12)
        assert torch.allclose(toy.autograd_grad(a.loss), ref, atol=1e-12)
    a = make_estimator("rollout_rs", dual_clip=c, **kw)(toy.terms())
    b = make_estimator("ppo", dual_clip=c)(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12, abs=1e-12)
    assert torch.allclose(toy.autograd_grad(a.loss), toy.autograd_grad(b.loss), atol=1e-12)
    assert a.metrics["dual_clip_frac"].item() == pytest.approx(b.metrics["dual_clip_frac"].item())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), delta=st.floats(1.25, 6.0))
def test_two_sided_clipping_is_ppo_dual_clip(seed, delta):
    """Sanity identity: INTELLECT-2's δ equals PPO's dual clip c = δ (values and gradients)."""
    toy = make_toy(shape=(5, 3), seed=seed, off_policy=1.0)
    a = make_estimator("two_sided_ppo", delta=delta)(toy.terms())
    b = make_estimator("ppo", dual_clip=delta)(toy.terms())
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-12, abs=1e-12)
    assert torch.allclose(toy.autograd_grad(a.loss), toy.autograd_grad(b.loss), atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), q=st.floats(0.0, 1.0), h=st.floats(0.01, 2.0))
def test_sat_is_pointwise_pessimistic_and_ppo_at_full_quantile(seed, q, h):
    """Every SAT token loss is ≥ PPO's (no dual clip); with quantile 1 no token is contracted."""
    toy = make_toy(shape=(6, 3), seed=seed, off_policy=0.8)
    terms = toy.terms(proximal_logp=toy.logp().detach() - 0.3)  # a log-probability: ≤ 0
    sat = make_estimator("sat", quantile=q, bandwidth=h).token_loss(terms).values
    ppo = make_estimator("ppo", dual_clip=None).token_loss(terms).values
    assert bool((sat >= ppo - 1e-12).all())
    full = make_estimator("sat", quantile=1.0).token_loss(terms).values
    assert torch.equal(full, ppo)


def test_population_axis_matches_members():
    toy = make_toy(shape=(4, 3), seed=5, pop=(3,), off_policy=0.5)
    for name in ["dppo", "two_sided_ppo", "sat", "rollout_rs"]:
        est = make_estimator(name)
        joint = est(toy.terms())
        for s in range(3):
            alone = est(PGTerms(logp=toy.logp()[s], advantages=toy.advantages[s], mask=toy.mask[s],
                                behavior_logp=toy.behavior_logp[s]))
            assert joint.metrics["ratio_mean"][s].item() == pytest.approx(alone.metrics["ratio_mean"].item())
        assert joint.loss.item() == pytest.approx(
            sum(est(PGTerms(logp=toy.logp()[s], advantages=toy.advantages[s], mask=toy.mask[s],
                            behavior_logp=toy.behavior_logp[s])).loss.item() for s in range(3))
        ), name


def test_capabilities():
    assert make_estimator("sat").batch_dependent
    assert not any(make_estimator(n).batch_dependent for n in ["dppo", "two_sided_ppo", "rollout_rs"])
    assert all(make_estimator(n).needs_behavior for n in ["dppo", "sat", "rollout_rs"])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("dppo", {"delta_low": -0.1}, r"delta_low must lie in \[0.0, inf\]"),
        ("dppo", {"kl_coef": -1.0}, r"kl_coef must lie in \[0.0, inf\]"),
        ("two_sided_ppo", {"delta": 1.1}, r"delta must lie in \(1.2, inf\]"),
        ("two_sided_ppo", {"eps_low": 1.5}, r"eps_low must lie in \[0.0, 1.0\]"),
        ("sat", {"quantile": 1.5}, r"quantile must lie in \[0.0, 1.0\]"),
        ("sat", {"bandwidth": 0.0}, r"bandwidth must lie in \(0.0, inf\]"),
        ("rollout_rs", {"statistic": "k4"}, "statistic must be one of"),
        ("rollout_rs", {"level": "seq"}, "level must be one of"),
        ("rollout_rs", {"loss": "gspo"}, "loss must be one of"),
        ("rollout_rs", {"statistic": "k1", "level": "seq_max", "upper": 2.0}, "level must be one of .* for statistic='k1'"),
        ("rollout_rs", {"statistic": "k1", "upper": 0.5}, r"upper must lie in \(1.0, inf\]"),
        ("rollout_rs", {"statistic": "k1", "upper": 2.0, "lower": 3.0}, r"lower must lie in \(0.0, 2.0\]"),
        ("rollout_rs", {"lower": 0.5}, "lower must be None for statistic='k3'"),
        ("rollout_rs", {"dual_clip": 1.0}, r"dual_clip must lie in \(1.0, inf\]"),
        ("rollout_rs", {"dual_clip": float("nan")}, r"dual_clip must lie in \(1.0, inf\]"),
    ],
)
def test_bad_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **kwargs)


@pytest.mark.parametrize("name", ["dppo", "sat", "rollout_rs"])
def test_missing_behavior_raises(name):
    terms = PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2))
    with pytest.raises(ValueError, match=f"{name} needs behavior_logp"):
        make_estimator(name)(terms)
