"""Clip-Cov and KL-Cov: hand values, analytic gradients, on-policy equivalences, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator
from sandbox.estimators.covariance import token_covariance

from .helpers import grad_ok, make_toy, n_valid

F64 = torch.float64



def _terms(log_r=(0.1, 0.0, 0.0, -0.2)):
    # log π = (−1, −2, −2, −3): centred (1, 0, 0, −1); A = (3, 1, 1, −2): centred (2.25, .25, .25, −2.75)
    # Cov = (2.25, 0, 0, 2.75)
    logp = torch.tensor([[-1.0], [-2.0], [-2.0], [-3.0]], dtype=F64)
    prox = logp - torch.tensor(log_r, dtype=F64).unsqueeze(-1)
    return PGTerms(logp=logp, advantages=torch.tensor([3.0, 1.0, 1.0, -2.0], dtype=F64), proximal_logp=prox,
                   generator=torch.Generator().manual_seed(0))


def test_token_covariance_hand_values():
    assert token_covariance(_terms())[:, 0].tolist() == pytest.approx([2.25, 0.0, 0.0, 2.75])


def test_kl_cov_hand_values():
    # ratio 0.25 of 4 tokens → 1 token, the largest Cov (token 3, log r = −0.2) gets c·|log r|
    terms = _terms()
    r = [math.exp(x) for x in (0.1, 0.0, 0.0, -0.2)]
    pg = -(3 * r[0] + 1 * r[1] + 1 * r[2] - 2 * r[3]) / 4
    est = make_estimator("kl_cov", ratio=0.25, coef=0.5)
    assert est.penalised_mask(terms)[:, 0].tolist() == [False, False, False, True]
    assert est(terms).loss.item() == pytest.approx(pg + 0.5 * 0.2 / 4)
    two = make_estimator("kl_cov", ratio=0.5, coef=0.5)  # tokens 3 and 0
    assert two(terms).loss.item() == pytest.approx(pg + 0.5 * (0.2 + 0.1) / 4)
    one = make_estimator("kl_cov", ratio=1e-4, coef=0.5)  # ⌊1e-4·4⌋ = 0 → at least 1
    assert one.penalised_mask(terms).sum().item() == 1


def test_clip_cov_hand_values():
    # r = (e^0.1, 1, 1, e^−0.2), ε = 0.2: nothing is PPO-clipped; Cov in (2.5, 5) only for token 3,
    # whose loss −A·r = 2·e^−0.2 is zeroed
    terms = _terms()
    est = make_estimator("clip_cov", cov_lb=2.5, cov_ub=5.0, ratio=0.25)
    assert est.zeroed_mask(terms)[:, 0].tolist() == [False, False, False, True]
    r = [math.exp(x) for x in (0.1, 0.0, 0.0, -0.2)]
    out = est(terms)
    assert out.loss.item() == pytest.approx(-(3 * r[0] + r[1] + r[2]) / 4)
    assert out.metrics["cov_zeroed_frac"].item() == pytest.approx(0.25)
    # a PPO-clipped token is never zeroed: with log r_3 = −0.5 (r < 0.8, A < 0) token 3 is clipped
    clipped = _terms(log_r=(0.1, 0.0, 0.0, -0.5))
    assert not est.zeroed_mask(clipped).any()


def test_clip_cov_draw_is_uniform_over_eligible_and_seeded():
    toy = make_toy(shape=(40, 4), seed=1, off_policy=0.05)
    est = make_estimator("clip_cov", ratio=0.05, cov_lb=-10.0, cov_ub=10.0, eps_low=1.0, eps_high=10.0)
    draws = [est.zeroed_mask(toy.terms(generator=torch.Generator().manual_seed(s))) for s in range(3)]
    n = math.floor(0.05 * int(toy.mask.sum()))
    assert all(int(d.sum()) == n and not bool((d & ~toy.mask).any()) for d in draws)
    again = est.zeroed_mask(toy.terms(generator=torch.Generator().manual_seed(0)))
    assert torch.equal(draws[0], again)
    assert not torch.equal(draws[0], draws[1])


# ----------------------------------------------------------------------------- analytic gradients
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_covariance_gradients_are_analytic(seed, B, T):
    toy = make_toy(shape=(B, T), seed=seed, off_policy=0.4)
    A = toy.advantages.unsqueeze(-1).expand_as(toy.mask)
    m, N = toy.mask, n_valid(toy.mask)
    log_r = toy.logp().detach() - toy.behavior_logp
    r = torch.exp(log_r)
    terms = toy.terms(generator=torch.Generator().manual_seed(seed))

    est = make_estimator("clip_cov", ratio=0.3, cov_lb=-0.5, cov_ub=2.0)
    zeroed = est.zeroed_mask(toy.terms(generator=torch.Generator().manual_seed(seed)))
    active = -A * r >= -A * torch.clamp(r, 0.8, 1.2)
    assert grad_ok(toy, est(terms), -A * r * active * ~zeroed * m / N)

    est = make_estimator("kl_cov", ratio=0.3, coef=0.7)
    picked = est.penalised_mask(toy.terms())
    assert grad_ok(toy, est(toy.terms()), (-A * r + 0.7 * torch.sign(log_r) * picked) * m / N)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 6), T=st.integers(1, 4))
def test_on_policy(seed, B, T):
    """At π_θ = π_prox: KL-Cov is REINFORCE (|log r| has zero gradient at 0); Clip-Cov is REINFORCE
    with its zeroed tokens removed."""
    toy = make_toy(shape=(B, T), seed=seed)
    anchor = toy.logp().detach()
    A = toy.advantages.unsqueeze(-1)
    m, N = toy.mask, n_valid(toy.mask)
    ref = toy.autograd_grad(make_estimator("reinforce")(toy.terms(behavior_logp=anchor)).loss)
    out = make_estimator("kl_cov", ratio=0.5)(toy.terms(behavior_logp=anchor))
    assert torch.allclose(toy.autograd_grad(out.loss), ref, atol=1e-12)
    est = make_estimator("clip_cov", ratio=0.5, cov_lb=-1.0, cov_ub=1.0)
    gen = torch.Generator().manual_seed(seed)
    zeroed = est.zeroed_mask(toy.terms(behavior_logp=anchor, generator=gen))
    out = est(toy.terms(behavior_logp=anchor, generator=torch.Generator().manual_seed(seed)))
    assert grad_ok(toy, out, -A * ~zeroed * m / N)


def test_population_members_use_their_own_statistics():
    toy = make_toy(shape=(5, 3), seed=7, pop=(2,), off_policy=0.3)
    est = make_estimator("kl_cov", ratio=0.2)
    joint = est(toy.terms()).loss.item()
    alone = sum(
        est(PGTerms(logp=toy.logp()[s], advantages=toy.advantages[s], mask=toy.mask[s],
                    behavior_logp=toy.behavior_logp[s])).loss.item()
        for s in range(2)
    )
    assert joint == pytest.approx(alone)


def test_capabilities():
    assert make_estimator("clip_cov").batch_dependent and make_estimator("kl_cov").batch_dependent


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("clip_cov", {"ratio": 0.0}, r"ratio must lie in \(0.0, 1.0\]"),
        ("clip_cov", {"cov_lb": 2.0, "cov_ub": 1.0}, r"cov_ub must lie in \(2.0, inf\]"),
        ("kl_cov", {"coef": -1.0}, r"coef must lie in \[0.0, inf\]"),
        ("kl_cov", {"ratio": 1.5}, r"ratio must lie in \(0.0, 1.0\]"),
    ],
)
def test_bad_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **kwargs)


def test_clip_cov_needs_generator():
    with pytest.raises(ValueError, match="clip_cov draws random numbers and needs generator"):
        make_estimator("clip_cov")(PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2),
                                           behavior_logp=torch.zeros(2, 3)))
    with pytest.raises(ValueError, match="kl_cov needs proximal_logp"):
        make_estimator("kl_cov")(PGTerms(logp=torch.zeros(2, 3), advantages=torch.ones(2)))
