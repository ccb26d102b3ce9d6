"""Plain policy gradients: REINFORCE, advantage-weighted regression, and the supervised oracle."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sandbox.core.validation import check_range
from sandbox.estimators.base import Estimator, PGTerms, TokenLoss, masked_mean, register_estimator


@register_estimator("reinforce")
@dataclass(frozen=True)
class Reinforce(Estimator):
    """REINFORCE: loss −A·log π_θ(a) per token (Williams 1992); needs no μ."""

    def token_loss(self, terms: PGTerms) -> torch.Tensor:
        return -terms.token_advantages * terms.logp


@register_estimator("awr")
@dataclass(frozen=True)
class AdvantageWeightedRegression(Estimator):
    """AWR: loss −min(exp(A/β), w_max)·log π_θ (Peng et al. 2019); needs no μ."""

    beta: float = 1.0  # temperature β > 0
    w_max: float = 20.0  # weight cap w_max > 0

    def check(self) -> None:
        check_range("beta", self.beta, low=0.0, low_open=True)
        check_range("w_max", self.w_max, low=0.0, low_open=True, finite=False)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        raw = torch.exp(terms.token_advantages / self.beta)
        weight = torch.clamp(raw, max=self.w_max)
        return TokenLoss(
            -weight * terms.logp,
            metrics={
                "weight_mean": masked_mean(weight, terms.valid),
                "clip_frac": masked_mean((raw > self.w_max).to(raw.dtype), terms.valid),
            },
        )


@register_estimator("xent")
@dataclass(frozen=True)
class CrossEntropy(Estimator):
    """Supervised oracle: loss −log π_θ(target); needs ``target_logp`` from the environment."""

    fits_target = True

    def token_loss(self, terms: PGTerms) -> torch.Tensor:
        if terms.target_logp is None:
            raise ValueError("xent needs target_logp (learner log-probs of the env's target); got None")
        return -terms.target_logp


__all__ = ["Reinforce", "AdvantageWeightedRegression", "CrossEntropy"]
