"""The objective protocol, the registry of objectives by name (``OBJECTIVES``: a run chooses one
with a task's ``objective`` key) and the plain objective ``estimator(terms)``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor

from sandbox.core.observations import ObservationSpec, check_reads
from sandbox.core.registry import Registry
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
    #: the observations it works on (``sandbox.core.observations``; () = any)
    reads: ClassVar[tuple[type[ObservationSpec], ...]] = ()

    @classmethod
    def compose(cls, policy: Any) -> Objective:
        """The objective for a run of ``policy`` (default: ``cls()``; a policy it cannot use is
        refused in one line)."""
        return cls()

    def check_advantage(self, advantage) -> None:
        """Refuse an advantage this objective cannot use (default: none; the learner asks)."""

    def __call__(self, estimator: Estimator, terms: PGTerms, rollout: Rollout,
                 params: Sequence[Tensor] | None = None) -> EstimatorOutput:
        raise NotImplementedError


#: the objectives by name: 'plain', 'exact' (``sandbox.objectives.exact``), 'screened'
#: (``sandbox.objectives.screened``)
OBJECTIVES: Registry[Objective] = Registry("objective")


def make_objective(name: str, spec: ObservationSpec, policy: Any, where: str) -> Objective:
    """The objective ``name`` for ``policy`` on an environment that shows ``spec`` (``where``: the
    task, for the message); an objective that cannot run there is refused in one line naming both."""
    cls = OBJECTIVES.get(name)
    if cls.reads:
        check_reads(f"objective {name!r}", cls.reads, spec, where)
    return cls.compose(policy)


@OBJECTIVES.register("plain")
@dataclass(frozen=True)
class Plain(Objective):
    """``estimator(terms)``; an estimator that fits the supervised target (``xent``) aggregates over
    the target's tokens where the rollout names them (``extras['target_mask']``)."""

    def __call__(self, estimator, terms, rollout, params=None):
        if estimator.fits_target and "target_mask" in rollout.extras:
            terms = dataclasses.replace(terms, mask=rollout.extras["target_mask"])
        return estimator(terms)


PLAIN = Plain()

__all__ = ["OBJECTIVES", "PLAIN", "Objective", "Plain", "make_objective"]
