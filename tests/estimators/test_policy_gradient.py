"""REINFORCE, AWR and the supervised oracle: values, analytic gradients."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms, make_estimator

from .helpers import make_toy, n_valid


def test_reinforce_hand_computed():
    # π(a) = (0.5, 0.25), A = (1, −2): loss = −(1·log 0.5 + (−2)·log 0.25)/2 = (log 2 − 2·log 4)/2 = −1.5·log 2
    logp = torch.log(torch.tensor([[0.5], [0.25]]))
    out = make_estimator("reinforce")(PGTerms(logp=logp, advantages=torch.tensor([1.0, -2.0])))
    assert out.loss.item() == pytest.approx(-1.5 * math.log(2))
    assert out.metrics["surprisal_mean"].item() == pytest.approx(1.5 * math.log(2))


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 6), T=st.integers(1, 5), K=st.integers(2, 6), seed=st.integers(0, 10_000),
    pop=st.sampled_from([(), (2,), (2, 3)]),
)
def test_reinforce_gradient_is_analytic(B, T, K, seed, pop):
    toy = make_toy(shape=(B, T), K=K, seed=seed, pop=pop)
    out = make_estimator("reinforce")(toy.terms())
    weight = -toy.advantages.unsqueeze(-1) * toy.mask / n_valid(toy.mask)
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=1e-12)


def test_reinforce_per_token_advantages():
    toy = make_toy(seed=4)
    adv = torch.randn(toy.mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out = make_estimator("reinforce")(toy.terms(advantages=adv))
    weight = -adv * toy.mask / n_valid(toy.mask)
    assert torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=1e-12)


def test_awr_hand_computed_and_gradient():
    # A = (0, 3.5, −1), β = 1, w_max = 20: weights (1, min(e^3.5 ≈ 33.1, 20) = 20, e^−1)
    logp = torch.log(torch.tensor([[0.5], [0.2], [0.1]], dtype=torch.float64)).requires_grad_(True)
    adv = torch.tensor([0.0, 3.5, -1.0], dtype=torch.float64)
    out = make_estimator("awr")(PGTerms(logp=logp, advantages=adv))
    w = torch.tensor([1.0, 20.0, math.exp(-1)], dtype=torch.float64)
    assert out.loss.item() == pytest.approx(float(-(w * logp.detach()[:, 0]).mean()))
    assert out.metrics["clip_frac"].item() == pytest.approx(1 / 3)
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert torch.allclose(grad[:, 0], -w / 3)


def test_xent_gradient_moves_towards_target():
    toy = make_toy(seed=5, ragged=False)
    targets = torch.randint(0, 5, toy.actions.shape, generator=torch.Generator().manual_seed(2))
    target_logp = torch.log_softmax(toy.logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    out = make_estimator("xent")(toy.terms(target_logp=target_logp))
    assert out.loss.item() == pytest.approx(float(-target_logp.detach().mean()))
    probs = torch.softmax(toy.logits.detach(), -1)
    onehot = torch.nn.functional.one_hot(targets, 5).to(probs.dtype)
    expected = -(onehot - probs) / toy.mask.numel()
    assert torch.allclose(toy.autograd_grad(out.loss), expected, atol=1e-12)
