"""The probability-only gate (DG's ablation): hand values, its analytic gradient, validation."""

from __future__ import annotations

import math

import pytest
import torch

from sandbox import PGTerms, make_estimator
from sandbox.estimators import ESTIMATORS


def test_prob_gate_is_in_the_library_registry():
    # registered by the library itself, so `sandbox run` accepts everything `sandbox list` shows
    assert "prob_gate" in ESTIMATORS.names()


def test_prob_gate_hand_values():
    # π = (0.5, 0.05), A = (1, −1), τ = 0.05, η = 0.25: w = (σ(4·log 10), σ(0)) = (1/(1 + 10⁻⁴), ½)
    # loss = −(w0·1·log 0.5 + w1·(−1)·log 0.05)/2
    logp = torch.log(torch.tensor([[0.5], [0.05]], dtype=torch.float64))
    out = make_estimator("prob_gate")(PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64)))
    w0, w1 = 1 / (1 + 1e-4), 0.5
    assert out.loss.item() == pytest.approx(-(w0 * math.log(0.5) - w1 * math.log(0.05)) / 2, rel=1e-12)


def test_prob_gate_suppresses_rare_actions_whatever_the_sign():
    # unlike DG, a rare success and a rare failure get the same (small) weight
    logp = torch.log(torch.tensor([[0.001], [0.001]], dtype=torch.float64)).requires_grad_()
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    make_estimator("prob_gate")(PGTerms(logp=logp, advantages=adv)).loss.backward()
    w = 1 / (1 + math.exp(-(math.log(0.001) - math.log(0.05)) / 0.25))
    # d loss / d logp_i = −w·A_i / B (the gate is a stop-gradient)
    assert logp.grad[:, 0].tolist() == pytest.approx([-w / 2, w / 2], rel=1e-12)


@pytest.mark.parametrize("kwargs, match", [({"tau": 0.0}, "tau must lie in"), ({"tau": 1.0}, "tau must lie in"),
                                           ({"eta": 0.0}, "eta must")])
def test_prob_gate_rejects_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_estimator("prob_gate", **kwargs)
