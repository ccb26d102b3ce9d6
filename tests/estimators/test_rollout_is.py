"""The rollout correction ``rollout_is`` (a base field every ``token_loss`` estimator composes with):
hand values of the four modes, w = 1 when π_prox = μ, and under a recomputed π_prox the
equivalence the ``sandbox check`` mapping relies on — PPO with token truncation is TIS."""

from __future__ import annotations

import math

import pytest
import torch

from sandbox import ESTIMATORS, PGTerms, make_estimator

from .helpers import make_toy

LOG_W = torch.tensor([[math.log(0.5), math.log(4.0)], [math.log(3.0), 0.0]], dtype=torch.float64)  # π_prox/μ
MASK = torch.tensor([[True, True], [True, False]])


def _terms() -> PGTerms:
    logp = torch.log(torch.tensor([[0.5, 0.2], [0.4, 0.9]], dtype=torch.float64))
    return PGTerms(logp=logp, advantages=torch.ones(2, dtype=torch.float64), mask=MASK,
                   behavior_logp=logp - LOG_W, proximal_logp=logp)


@pytest.mark.parametrize("mode, bounds, expected", [
    ("token_truncate", {"rollout_is_max": 2.0}, [[0.5, 2.0], [2.0]]),
    ("token_truncate", {"rollout_is_max": 2.0, "rollout_is_min": 0.8}, [[0.8, 2.0], [2.0]]),
    ("token_mask", {"rollout_is_max": 3.0}, [[0.5, 0.0], [3.0]]),
    ("token_mask", {"rollout_is_max": 3.5, "rollout_is_min": 0.6}, [[0.0, 0.0], [3.0]]),
    # sequence 0: 0.5·4 = 2, sequence 1: 3 (its padded token carries no ratio)
    ("sequence_truncate", {"rollout_is_max": 2.5}, [[2.0, 2.0], [2.5]]),
    ("sequence_mask", {"rollout_is_max": 2.5}, [[2.0, 2.0], [0.0]]),
])
def test_weights_hand_values(mode, bounds, expected):
    w = make_estimator("reinforce", rollout_is=mode, **bounds).rollout_is_weight(_terms())
    assert w[0].tolist() == pytest.approx(expected[0])
    assert w[1, 0].item() == pytest.approx(expected[1][0])


def test_loss_is_weighted_token_by_token():
    # REINFORCE, token-mean over 3 valid tokens: −Σ w·log π / 3 with w = (0.5, 2, 2)
    out = make_estimator("reinforce", rollout_is="token_truncate", rollout_is_max=2.0)(_terms())
    expected = -(0.5 * math.log(0.5) + 2.0 * math.log(0.2) + 2.0 * math.log(0.4)) / 3
    assert out.loss.item() == pytest.approx(expected)
    assert out.metrics["rollout_is_mean"].item() == pytest.approx(4.5 / 3)


@pytest.mark.parametrize("name", [n for n in ESTIMATORS.names() if n not in ("pmpo", "xent")])
def test_identity_when_the_proximal_policy_is_the_behaviour(name):
    """π_prox defaults to μ: every mode leaves every estimator's loss unchanged."""
    toy = make_toy(seed=5, off_policy=0.5)
    base = make_estimator(name)(toy.terms(generator=torch.Generator().manual_seed(0))).loss
    for mode in ("token_mask", "sequence_truncate"):
        corrected = make_estimator(name, rollout_is=mode, rollout_is_max=1.5)
        loss = corrected(toy.terms(generator=torch.Generator().manual_seed(0))).loss
        assert loss.item() == pytest.approx(base.item(), rel=1e-12)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_recomputed_proximal_ppo_with_truncation_is_tis(level):
    """One update per batch with π_prox = sg(π_θ): the PPO ratio is 1, the correction min(π_θ/μ, C)
    — the gradient of TIS at the same level and cap (what verl's decoupled mode and TRL's vLLM
    correction reduce to)."""
    toy = make_toy(seed=7, off_policy=0.6)
    logp = toy.logp()
    ppo = make_estimator("ppo", rollout_is=f"{level}_truncate", rollout_is_max=1.3)
    tis = make_estimator("tis", C=1.3, level=level)
    g_ppo = toy.autograd_grad(ppo(toy.terms(logp=logp, proximal_logp=logp.detach())).loss)
    g_tis = toy.autograd_grad(tis(toy.terms()).loss)
    assert torch.allclose(g_ppo, g_tis, atol=1e-12)


def test_bad_input_is_one_line_naming_the_field():
    with pytest.raises(ValueError, match="rollout_is must be one of"):
        make_estimator("ppo", rollout_is="token")
    with pytest.raises(ValueError, match="rollout_is_max must lie in"):
        make_estimator("ppo", rollout_is="token_mask", rollout_is_max=0.0)
    with pytest.raises(ValueError, match="rollout_is_min must lie in"):
        make_estimator("ppo", rollout_is="token_mask", rollout_is_max=2.0, rollout_is_min=2.0)
    with pytest.raises(ValueError, match="rollout_is must be None for pmpo"):
        make_estimator("pmpo", rollout_is="token_mask")
    terms = PGTerms(logp=torch.zeros(2, 1), advantages=torch.ones(2))
    with pytest.raises(ValueError, match="reinforce with rollout_is needs behavior_logp"):
        make_estimator("reinforce", rollout_is="token_mask")(terms)
