"""The objective protocol and the plain objective ``estimator(terms)``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from sandbox.core.rollout import Rollout
from sandbox.core.terms import EstimatorOutput, PGTerms
from sandbox.estimators.base import Estimator


class Objective:
    """``objective(estimator, terms, rollout, params)`` → the loss whose gradient is the update.

    Capabilities are class attributes: ``enumerates`` — the actor enumerates every action of every
    context with weight μ(a|x)/n instead of sampling; ``rescores`` — the learner scores the rollout
    without gradients and the objective re-runs the rows it needs with them."""

    enumerates: ClassVar[bool] = False
    rescores: ClassVar[bool] = False

    def check_advantage(self, advantage) -> None:
        """Refuse an advantage this objective cannot use (default: none; the learner asks)."""

    def __call__(self, estimator: Estimator, terms: PGTerms, rollout: Rollout,
                 params: Sequence[Tensor] | None = None) -> EstimatorOutput:
        raise NotImplementedError


@dataclass(frozen=True)
class Plain(Objective):
    """``estimator(terms)``; an estimator that fits the supervised target (``xent``) aggregates over
    the target's tokens where the rollout names them (``extras['target_mask']``)."""

    def __call__(self, estimator, terms, rollout, params=None):
        if estimator.fits_target and "target_mask" in rollout.extras:
            terms = dataclasses.replace(terms, mask=rollout.extras["target_mask"])
        return estimator(terms)


PLAIN = Plain()

__all__ = ["PLAIN", "Objective", "Plain"]
