"""Admission rules: what the learner takes of a rollout staler than the budget, one registered
class each (AReaL's staleness control, ``max_head_offpolicyness``).

A rule is a frozen dataclass registered in ``ADMISSION_RULES`` (``@register_admission("name")``)
with the budget b as its field and two stages: ``cap(d, k)`` on the actor's side (the delay it may
start a rollout with; k the broadcast period) and ``admit(rollout, step)`` on the learner's side
(the rollout's admitted mask and the fraction of prompts with no admitted token). Its running
accounting is an ``AdmissionLedger`` (one per run, checkpointed with the learner). Capabilities
are class attributes: ``paces`` (the rule caps the delay: the actor waits), ``filters`` (the rule
masks rows or tokens and so logs ``prompts_dropped_frac``), ``needs_budget``.

- pace: d_t ← min(d_t, b − (k − 1)), so that no rollout is staler than b (Ray's bounded mode).
- drop: m ← m ∧ [max_t (step − version) ≤ b] per row (its prompt may never reach the learner).
- mask: m ← m ∧ [step − version ≤ b] per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.core.validation import check_int, check_range

ADMISSION_RULES: Registry[Admission] = Registry("admission")


def register_admission(name: str, *, replace: bool = False):
    """``@register_admission("name")`` above ``@dataclass(frozen=True)``: a new admission rule."""
    return ADMISSION_RULES.register(name, replace=replace)


def admission_names() -> tuple[str, ...]:
    """The registered admission rules, built-ins first, in the order they were registered."""
    return ADMISSION_RULES.in_order()


@dataclass(frozen=True)
class Admission:
    """Base class: every rollout admitted as it is. ``budget``: the largest staleness admitted
    (None: no budget)."""

    name: ClassVar[str] = "admission"
    #: the rule caps the actor's delay (the actor waits) instead of filtering the rollout
    paces: ClassVar[bool] = False
    #: the rule masks rows or tokens of the rollout (and logs ``prompts_dropped_frac``)
    filters: ClassVar[bool] = False
    #: without a budget the rule would admit every rollout: a budget is required
    needs_budget: ClassVar[bool] = False

    budget: int | None = None

    def __post_init__(self) -> None:
        if self.budget is not None:
            check_int("budget", self.budget, low=0)
        elif self.needs_budget:  # without a budget every rollout would be admitted, silently
            raise ValueError(f"staleness admission={self.name!r} needs a budget: set staleness.budget to an "
                             "int ≥ 0 (the largest staleness admitted)")

    def check_broadcast(self, broadcast_every: int) -> None:
        """Refuse a broadcast period the rule cannot keep within its budget (default: any is fine)."""

    def cap(self, delay: int, broadcast_every: int = 1) -> int:
        """The delay the actor may start with (the identity unless the rule ``paces``)."""
        return delay

    def fresh(self, rollout: Rollout, step: int) -> Tensor:
        """The tokens admitted at ``step``, ``[*P, B, T]`` bool (before the rollout's own mask)."""
        return torch.ones_like(rollout.mask)

    def admit(self, rollout: Rollout, step: int) -> tuple[Rollout, Tensor | None]:
        """The rollout as the learner admits it at ``step`` and, for a rule that ``filters``, the
        fraction of its prompts (groups) ``[*P]`` with no admitted token (else None)."""
        check_range("step", step, low=0)
        if self.budget is None or not self.filters:
            return rollout, None
        mask = rollout.mask & self.fresh(rollout, step)
        shape = rollout.mask.shape[:-1]
        groups, index = int(rollout.group.max()) + 1, rollout.group.expand(shape)
        rows = torch.zeros(*shape[:-1], groups, dtype=torch.float64).scatter_add_(
            -1, index, torch.ones(shape, dtype=torch.float64))
        reached = torch.zeros_like(rows).scatter_add_(-1, index, mask.any(-1).to(torch.float64))
        dropped = ((rows > 0) & (reached == 0)).sum(-1) / (rows > 0).sum(-1)
        return rollout.replace(mask=mask), dropped.to(torch.float64)


@register_admission("pace")
@dataclass(frozen=True)
class Pace(Admission):
    """the actor waits: nothing staler than the budget is sampled (Ray's bounded mode, AReaL)"""

    paces: ClassVar[bool] = True

    def check_broadcast(self, broadcast_every: int) -> None:
        if self.budget is not None and self.budget < broadcast_every - 1:
            raise ValueError(f"staleness budget={self.budget} with broadcast_every={broadcast_every}: pacing keeps "
                             f"staleness ≤ budget only when budget ≥ broadcast_every − 1 (weights are published "
                             f"every {broadcast_every} steps); raise the budget or publish more often")

    def cap(self, delay: int, broadcast_every: int = 1) -> int:
        return delay if self.budget is None else min(delay, self.budget - (broadcast_every - 1))


@register_admission("drop")
@dataclass(frozen=True)
class Drop(Admission):
    """a row with any token staler than the budget never reaches the learner; the fraction of prompts
    lost is logged (prompts_dropped_frac)"""

    filters: ClassVar[bool] = True
    needs_budget: ClassVar[bool] = True

    def fresh(self, rollout: Rollout, step: int) -> Tensor:
        fresh = rollout.staleness(step) <= self.budget
        return (fresh | ~rollout.mask).all(-1, keepdim=True)


@register_admission("mask")
@dataclass(frozen=True)
class Mask(Admission):
    """tokens staler than the budget are masked out of the loss; the rest of the row is kept"""

    filters: ClassVar[bool] = True
    needs_budget: ClassVar[bool] = True

    def fresh(self, rollout: Rollout, step: int) -> Tensor:
        return rollout.staleness(step) <= self.budget


class AdmissionLedger:
    """A run's admission at the learner, with its running accounting: the mean over steps of the
    fraction of prompts dropped, per member ``[S]``; a member with no admitted token waits (no
    optimiser step). ``state``/``load`` go into the learner's checkpoint."""

    def __init__(self, rule: Admission, population: int, device: torch.device | str = "cpu") -> None:
        self.rule, self.population = rule, int(population)
        self.state: tuple[Tensor, int] = (torch.zeros(self.population, dtype=torch.float64, device=device), 0)

    def load(self, state: tuple[Tensor, int]) -> None:
        self.state = state

    def admit(self, rollout: Rollout, step: int) -> tuple[Rollout | None, Tensor, Tensor | None]:
        """(the rollout to learn from — None when every member waits —, the members that wait
        ``[S]``, the running fraction of prompts dropped ``[S]`` or None when the rule filters nothing)."""
        S = self.population
        admitted, dropped = self.rule.admit(rollout, step)
        waiting = torch.zeros(S, dtype=torch.bool, device=self.state[0].device)
        if dropped is None:
            return rollout, waiting, None
        self.state = (self.state[0] + dropped, self.state[1] + 1)
        dropped_frac = self.state[0] / self.state[1]
        waiting = ~admitted.mask.reshape(S, -1).any(-1)
        if bool(waiting.all()):
            return None, waiting, dropped_frac
        # the waiting members' gradients are computed on their whole batch and not applied
        keep = waiting.reshape(S, *([1] * (rollout.mask.ndim - 1)))
        return admitted.replace(mask=torch.where(keep, rollout.mask, admitted.mask)), waiting, dropped_frac


__all__ = ["ADMISSION_RULES", "Admission", "AdmissionLedger", "Drop", "Mask", "Pace", "admission_names",
           "register_admission"]
