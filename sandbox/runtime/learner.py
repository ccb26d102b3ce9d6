"""The learner's loss: score the rollout under the learner, compute advantages, build ``PGTerms``
and differentiate the task's objective (DESIGN.md, data flow: rollout → advantages → estimator).
Every task goes through ``learner_loss``, the one loss call."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from sandbox.advantages import Advantage, compute_advantages
from sandbox.core.rollout import Rollout
from sandbox.core.terms import EstimatorOutput, PGTerms
from sandbox.core.validation import on_host
from sandbox.estimators.base import Estimator, sequence_log_ratio
from sandbox.tasks.base import Task


def learner_terms(task: Task, params: Sequence[Tensor], rollout: Rollout, advantage: Advantage,
                  generator: torch.Generator | None, recompute_proximal: bool, grad: bool = True) -> PGTerms:
    """``PGTerms`` of ``rollout`` under ``params``: log π_θ from the task, A = advantage(R, group,
    **needs) with ρ = exp Σ_t m·(log π_θ − log μ) and the token mask m supplied here and the
    task's other providers; ``recompute_proximal`` sets π_prox to the learner's own (detached)
    log-probs instead of μ."""
    task.objective.check_advantage(advantage)
    if advantage.baseline_from_group and on_host(rollout.group) and _groups_of_one(rollout.group):
        raise ValueError(f"advantage {advantage.name!r} takes each row's baseline from the other samples of its "
                         f"group, but every group of this batch holds one sample, so A = 0 and nothing is learnt; "
                         f"use this task's default {type(task).default_advantage!r} (or 'confidence', 'constant'), "
                         "or draw several samples per context")
    rollout = task.learner_rollout(rollout)
    scored = task.score(params, rollout, grad=grad)
    logp = scored.logp
    adv = compute_advantages(
        advantage, rollout.rewards, rollout.group, type(task).__name__,
        rho=lambda: torch.exp(sequence_log_ratio(logp.detach(), rollout.behavior_logp, rollout.mask)),
        mask=lambda: rollout.mask,
        **scored.providers,
    )
    return PGTerms(
        logp=logp,
        advantages=adv,
        mask=rollout.mask,
        behavior_logp=rollout.behavior_logp,
        proximal_logp=logp.detach() if recompute_proximal else None,
        group=rollout.group,
        target_logp=scored.target_logp,
        generator=generator,
    )


def learner_loss(task: Task, estimator: Estimator, params: Sequence[Tensor], rollout: Rollout,
                 advantage: Advantage, generator: torch.Generator | None, recompute_proximal: bool
                 ) -> tuple[PGTerms, EstimatorOutput]:
    """The one loss call: ``task.objective(estimator, terms, rollout, params)`` on the learner's
    ``PGTerms`` (plain, exact enumeration or screened backward: ``sandbox.objectives``)."""
    terms = learner_terms(task, params, rollout, advantage, generator, recompute_proximal)
    return terms, task.objective(estimator, terms, rollout, params)


def _groups_of_one(group: Tensor) -> bool:
    """Whether no group id of the (first member's) batch occurs twice."""
    ids = group.reshape(-1, group.shape[-1])[0]
    return bool(torch.unique(ids).numel() == ids.numel())
