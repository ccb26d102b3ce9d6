"""The contract: aggregation modes, PGTerms validation, registry, population axis, diagnostics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import ESTIMATORS, PGTerms, make_estimator
from sandbox.estimators.base import aggregate, behavior_diagnostics, effective_sample_size_fraction

from .helpers import make_toy

# ----------------------------------------------------------------------------- aggregation
# Two sequences, T = 3; sequence 0 has 2 valid tokens (1, 2), sequence 1 has 3 (3, 4, 5).
VALUES = torch.tensor([[1.0, 2.0, 99.0], [3.0, 4.0, 5.0]])
MASK = torch.tensor([[True, True, False], [True, True, True]])


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", (1 + 2 + 3 + 4 + 5) / 5),  # 3.0
        ("seq-mean-token-mean", ((1 + 2) / 2 + (3 + 4 + 5) / 3) / 2),  # (1.5 + 4) / 2 = 2.75
        ("seq-mean-token-sum", ((1 + 2) + (3 + 4 + 5)) / 2),  # 7.5
        ("seq-mean-token-sum-norm", (1 + 2 + 3 + 4 + 5) / (2 * 3)),  # 2.5
    ],
)
def test_aggregation_hand_computed(mode, expected):
    assert aggregate(VALUES, MASK, mode).item() == pytest.approx(expected, abs=1e-12)


def test_aggregation_ignores_padding_rows_and_values():
    values = torch.tensor([[1.0, 2.0], [float("nan"), 7.0]])
    mask = torch.tensor([[True, True], [False, False]])
    for mode, expected in [("token-mean", 1.5), ("seq-mean-token-mean", 1.5), ("seq-mean-token-sum", 3.0)]:
        assert aggregate(values, mask, mode).item() == pytest.approx(expected)


def test_aggregation_unknown_mode():
    with pytest.raises(ValueError, match="aggregation must be one of"):
        aggregate(VALUES, MASK, "mean")


@pytest.mark.parametrize("name", ESTIMATORS.names())
def test_every_estimator_accepts_every_aggregation(name):
    toy = make_toy(seed=3)
    kwargs = {"target_logp": toy.logp()} if name == "xent" else {}
    for mode in ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]:
        out = make_estimator(name, aggregation=mode)(toy.terms(generator=torch.Generator().manual_seed(0), **kwargs))
        assert out.loss.ndim == 0 and torch.isfinite(out.loss)


# ----------------------------------------------------------------------------- registry
def test_unknown_estimator_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown estimator 'nope'.*'dg'.*'reinforce'"):
        make_estimator("nope")


def test_unknown_hyperparameter_lists_valid_fields():
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['temperature'\].*'eta'"):
        make_estimator("dg", temperature=1.0)


def test_every_spec_estimator_is_registered():
    spec = {
        "reinforce", "is_pg", "tis", "mis", "vtrace_pg", "awr", "xent", "ppo", "decoupled_ppo",
        "gspo", "cispo", "sapo", "m2po", "opsm", "pmpo", "dg", "kondo",
    }
    assert spec <= set(ESTIMATORS.names())


def test_duplicate_registration_raises():
    from dataclasses import dataclass

    from sandbox import Estimator, register_estimator

    with pytest.raises(ValueError, match="takes the name of the built-in estimator 'reinforce'.* --override reinforce"):

        @register_estimator("reinforce")
        @dataclass(frozen=True)
        class Shadow(Estimator):
            def token_loss(self, terms):
                return -terms.logp


# ----------------------------------------------------------------------------- validation
def _terms(**kw):
    base = dict(logp=torch.zeros(2, 3), advantages=torch.zeros(2), mask=torch.ones(2, 3, dtype=torch.bool))
    base.update(kw)
    return PGTerms(**base)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"logp": torch.zeros(3)}, r"logp must have shape \[\*P, B, T\]"),
        ({"logp": torch.zeros(2, 3, dtype=torch.long)}, "logp must have a float dtype"),
        ({"logp": torch.tensor([[0.0, float("nan"), 0.0], [0.0, 0.0, 0.0]])}, "logp contains NaN or inf"),
        ({"logp": torch.tensor([[0.0, -float("inf"), 0.0], [0.0, 0.0, 0.0]])}, "logp contains NaN or inf"),
        ({"advantages": torch.zeros(3)}, r"advantages must have shape \(2,\) \(per sequence\) or \(2, 3\)"),
        ({"advantages": torch.tensor([1.0, float("inf")])}, "advantages contains NaN or inf"),
        ({"mask": torch.ones(2, 3)}, "mask must have a bool dtype"),
        ({"mask": torch.ones(2, 2, dtype=torch.bool)}, r"mask must have shape \(2, 3\)"),
        ({"mask": torch.zeros(2, 3, dtype=torch.bool)}, "mask has no valid"),
        ({"behavior_logp": torch.zeros(3, 2)}, r"behavior_logp must have shape \(2, 3\)"),
        ({"behavior_logp": torch.full((2, 3), float("nan"))}, "behavior_logp contains NaN"),
        ({"proximal_logp": torch.zeros(2, 3, dtype=torch.int32)}, "proximal_logp must have a float dtype"),
        ({"group": torch.zeros(2)}, "group must have a int dtype"),
        ({"group": torch.zeros(5, dtype=torch.long)}, r"group must have shape \(2,\)"),
        ({"generator": 3}, "generator must be a torch.Generator"),
    ],
)
def test_pgterms_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _terms(**kwargs)


def test_all_false_mask_in_one_population_member_raises():
    mask = torch.ones(2, 2, 3, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="mask has no valid"):
        PGTerms(logp=torch.zeros(2, 2, 3), advantages=torch.zeros(2, 2), mask=mask)


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("dg", {"eta": -0.1}, r"eta must lie in \[0.0, inf\]"),
        ("dg", {"gate_input": "product"}, "gate_input must be one of"),
        ("dg", {"alpha": 1.5}, r"alpha must lie in \[0.0, 1.0\]"),
        ("dg", {"surprisal_clip": 0.0}, r"surprisal_clip must lie in \(0.0, inf\]"),
        ("dg", {"lam": float("nan")}, "lam must lie in"),
        ("kondo", {"pct": 0.0}, r"pct must lie in \(0.0, 1.0\]"),
        ("kondo", {"pct": 1.1}, r"pct must lie in \(0.0, 1.0\]"),
        ("kondo", {"priority": "random"}, "priority must be one of"),
        ("tis", {"C": 0.0}, r"C must lie in \(0.0, inf\]"),
        ("tis", {"level": "batch"}, "level must be one of"),
        ("mis", {"alpha": 2.0, "beta": 1.0}, r"beta must lie in \(2.0, inf\]"),
        ("mis", {"alpha": -1.0}, r"alpha must lie in \[0.0, inf\]"),
        ("mis", {"geometric": True}, "geometric=True requires level='sequence'"),
        ("vtrace_pg", {"gamma": 1.5}, r"gamma must lie in \[0.0, 1.0\]"),
        ("vtrace_pg", {"rho_bar": 0.0}, r"rho_bar must lie in \(0.0, inf\]"),
        ("awr", {"beta": 0.0}, r"beta must lie in \(0.0, inf\]"),
        ("awr", {"w_max": -1.0}, r"w_max must lie in \(0.0, inf\]"),
        ("ppo", {"eps_low": 1.5}, r"eps_low must lie in \[0.0, 1.0\]"),
        ("ppo", {"dual_clip": 0.5}, r"dual_clip must lie in \(1.0, inf\]"),
        ("decoupled_ppo", {"k_max": 0.0}, r"k_max must lie in \(0.0, inf\]"),
        ("gspo", {"eps_high": -1e-4}, r"eps_high must lie in \[0.0, inf\]"),
        ("cispo", {"eps_low": -1.0}, r"eps_low must lie in \[0.0, inf\]"),
        ("sapo", {"tau_neg": 0.0}, r"tau_neg must lie in \(0.0, inf\]"),
        ("m2po", {"tau": 0.0}, r"tau must lie in \(0.0, inf\]"),
        ("opsm", {"delta": -0.5}, r"delta must lie in \[0.0, inf\]"),
        ("pmpo", {"alpha": -0.1}, r"alpha must lie in \[0.0, 1.0\]"),
        ("pmpo", {"beta": -1.0}, r"beta must lie in \[0.0, inf\]"),
        ("reinforce", {"aggregation": "sum"}, "aggregation must be one of"),
        ("dg", {"eta": "1"}, "eta must be a number"),
    ],
)
def test_out_of_range_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **kwargs)


@pytest.mark.parametrize("name", [n for n in ESTIMATORS.names() if ESTIMATORS.get(n).needs_behavior])
def test_estimators_that_need_mu_say_so(name):
    with pytest.raises(ValueError, match="needs behavior_logp"):
        make_estimator(name)(_terms())


def test_trust_region_without_any_anchor_says_so():
    with pytest.raises(ValueError, match="needs proximal_logp"):
        make_estimator("ppo")(_terms())


def test_xent_needs_target():
    with pytest.raises(ValueError, match="xent needs target_logp"):
        make_estimator("xent")(_terms())


def test_stochastic_estimators_need_a_generator():
    with pytest.raises(ValueError, match="needs generator"):
        make_estimator("dg", stochastic=True)(_terms())
    with pytest.raises(ValueError, match="needs generator"):
        make_estimator("kondo", priority="uniform")(_terms())


def test_estimator_rejects_non_terms():
    with pytest.raises(ValueError, match="terms must be a PGTerms"):
        make_estimator("reinforce")({"logp": torch.zeros(1, 1)})


# ----------------------------------------------------------------------------- population axis
@pytest.mark.parametrize("name", ESTIMATORS.names())
def test_population_members_never_mix(name):
    """Stacking S independent batches on a population axis: loss = Σ of per-member losses,
    metrics = the stacked per-member metrics, gradients = per-member gradients."""
    toys = [make_toy(seed=s, shape=(5, 3)) for s in range(3)]
    stacked = make_toy(seed=0, shape=(5, 3), pop=(3,))
    with torch.no_grad():
        for i, t in enumerate(toys):
            for field in ("logits", "actions", "advantages", "mask", "behavior_logp"):
                getattr(stacked, field)[i] = getattr(t, field)
    # clip_cov draws its tokens at random: ratio 1 zeroes every eligible token, so the draw cannot
    # differ between the stacked and the separate batches
    kwargs = {"dg": {"whiten": True}, "clip_cov": {"ratio": 1.0}}.get(name, {})
    est = make_estimator(name, **kwargs)

    def run(toy):
        extra = {"target_logp": toy.logp()} if name == "xent" else {}
        return est(toy.terms(generator=torch.Generator().manual_seed(0), **extra))

    outs = [run(t) for t in toys]
    joint = run(stacked)
    assert joint.loss.item() == pytest.approx(sum(o.loss.item() for o in outs), rel=1e-10, abs=1e-12)
    for key, value in joint.metrics.items():
        assert value.shape == (3,), key
        expected = torch.stack([o.metrics[key] for o in outs])
        assert torch.allclose(value, expected, rtol=1e-10, atol=1e-12, equal_nan=True), key
    joint_grad = stacked.autograd_grad(joint.loss)
    for i, (t, o) in enumerate(zip(toys, outs)):
        assert torch.allclose(joint_grad[i], t.autograd_grad(o.loss), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- diagnostics
def test_ess_of_equal_ratios_is_B():
    log_w = torch.full((7,), 0.37)
    assert effective_sample_size_fraction(log_w, torch.ones(7, dtype=torch.bool)).item() == pytest.approx(1.0)
    toy = make_toy(seed=1, off_policy=0.0)
    assert make_estimator("reinforce")(toy.terms()).metrics["ess_frac"].item() == pytest.approx(1.0)


def test_ess_hand_computed():
    # ρ = (1, 3): ESS = 16 / 10 = 1.6, /B = 0.8
    log_w = torch.log(torch.tensor([1.0, 3.0]))
    assert effective_sample_size_fraction(log_w, torch.tensor([True, True])).item() == pytest.approx(0.8)


def test_behavior_diagnostics_hand_computed():
    logp = torch.log(torch.tensor([[0.5], [0.2]], dtype=torch.float64))
    mu = torch.log(torch.tensor([[0.25], [0.4]], dtype=torch.float64))
    d = behavior_diagnostics(logp, mu, torch.ones(2, 1, dtype=torch.bool))
    r = torch.tensor([2.0, 0.5], dtype=torch.float64)
    assert d["ratio_mean"].item() == pytest.approx(1.25)
    assert d["ratio_min"].item() == pytest.approx(0.5) and d["ratio_max"].item() == pytest.approx(2.0)
    assert d["kl_k1"].item() == pytest.approx(float((-torch.log(r)).mean()))
    assert d["kl_k3"].item() == pytest.approx(float((r - 1 - torch.log(r)).mean()))
    assert d["ess_frac"].item() == pytest.approx((2.5**2) / (2 * (4 + 0.25)))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=1, max_size=30))
def test_ess_fraction_in_unit_interval(log_w):
    lw = torch.tensor(log_w, dtype=torch.float64)
    ess = effective_sample_size_fraction(lw, torch.ones_like(lw, dtype=torch.bool)).item()
    assert 1.0 / len(log_w) - 1e-9 <= ess <= 1.0 + 1e-9


def test_metrics_are_detached_and_finite():
    toy = make_toy(seed=2)
    for name in ESTIMATORS.names():
        extra = {"target_logp": toy.logp()} if name == "xent" else {}
        out = make_estimator(name)(toy.terms(generator=torch.Generator().manual_seed(0), **extra))
        for key, value in out.metrics.items():
            assert not value.requires_grad, (name, key)
            assert math.isfinite(value.item()), (name, key)


# ----------------------------------------------------------------------------- kl_coef penalty
def test_kl_coef_hand_values():
    # REINFORCE + τ·(log π − log μ)²: log π − log μ = (0.2, −0.4), τ = 0.5, A = (1, 1), token-mean
    logp = torch.log(torch.tensor([[0.5], [0.2]], dtype=torch.float64))
    mu = logp - torch.tensor([[0.2], [-0.4]], dtype=torch.float64)
    terms = PGTerms(logp=logp, advantages=torch.ones(2, dtype=torch.float64), behavior_logp=mu)
    out = make_estimator("reinforce", kl_coef=0.5)(terms)
    expected = -(math.log(0.5) + math.log(0.2)) / 2 + 0.5 * (0.04 + 0.16) / 2
    assert out.loss.item() == pytest.approx(expected)
    assert out.metrics["kl_sq_mean"].item() == pytest.approx(0.1)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_kl_coef_gradient_is_analytic(seed):
    # weight = −A + 2τ·(log π − log μ) per valid token, over N valid tokens
    toy = make_toy(shape=(4, 3), seed=seed, off_policy=0.5)
    out = make_estimator("reinforce", kl_coef=0.3)(toy.terms())
    A = toy.advantages.unsqueeze(-1)
    weight = (-A + 0.6 * (toy.logp().detach() - toy.behavior_logp)) * toy.mask / toy.mask.sum()
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=1e-12)


@pytest.mark.parametrize("name", [n for n in ESTIMATORS.names() if n != "pmpo"])
def test_kl_coef_composes_with_every_estimator(name):
    """loss(τ) − loss(0) = τ·aggregate((log π − log μ)²) over the tokens the estimator aggregates."""
    toy = make_toy(seed=4, off_policy=0.5)
    kwargs = {"target_logp": toy.logp()} if name == "xent" else {}
    terms = toy.terms(generator=torch.Generator().manual_seed(0), **kwargs)
    base = make_estimator(name)
    tau = 0.25 + base.kl_coef  # dppo's default kl_coef is 1e-3
    with_kl = make_estimator(name, kl_coef=tau)
    mask = with_kl.penalized_token_loss(toy.terms(generator=torch.Generator().manual_seed(0), **kwargs)).mask
    mask = toy.mask if mask is None else mask
    sq = (toy.logp().detach() - toy.behavior_logp).pow(2)
    delta = with_kl(toy.terms(generator=torch.Generator().manual_seed(0), **kwargs)).loss - base(terms).loss
    expected = (tau - base.kl_coef) * aggregate(sq, mask, base.aggregation)
    assert delta.item() == pytest.approx(expected.item(), rel=1e-9)


def test_kl_coef_bad_input():
    with pytest.raises(ValueError, match=r"kl_coef must lie in \[0.0, inf\]"):
        make_estimator("ppo", kl_coef=-0.1)
    with pytest.raises(ValueError, match="kl_coef must be 0 for pmpo"):
        make_estimator("pmpo", kl_coef=0.1)
    with pytest.raises(ValueError, match="reinforce with kl_coef > 0 needs behavior_logp"):
        make_estimator("reinforce", kl_coef=0.1)(_terms())
