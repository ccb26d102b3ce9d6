"""Staleness: the actor samples with the learner's parameters from d_t steps ago.

A delay schedule gives d_t for every learner step t; it is the first stage of the friction stack
(``FrictionStack.schedule``), built from ``RunConfig.staleness`` and validated here, once. The
simulated loop (``sandbox.runtime.history`` keeps the versions it needs) and the Ray runtime
(``sandbox.runtime.ray_async``, which starts the rollout of step t with version t − d_t) realise the
same object. D = 0 reproduces the synchronous loop bit for bit.

Admission (AReaL's staleness control, ``max_head_offpolicyness``): with a ``budget`` b the learner
either paces the actor so that no rollout is staler than b (``'pace'``: d_t ← min(d_t, b), what
Ray's bounded mode does), discards rows with a token staler than b (``'drop'``: their prompts may
never reach the learner) or keeps the rows and masks the stale tokens (``'mask'``). ``admit``
applies it to a rollout, once, for the simulated and the Ray runtimes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.rollout import Rollout
from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_choice, check_field_types, check_int, check_range

DELAY_KINDS = ("none", "fixed", "uniform", "geometric", "per_actor")
ADMISSIONS = ("pace", "drop", "mask")


@dataclass(frozen=True)
class DelaySchedule:
    """Delay d_t of the actor behind the learner.

    kind: 'none' (d = 0, the synchronous loop), 'fixed' (d = D), 'uniform' (d ~ U{0..D}),
    'geometric' (d ~ Geometric(p) − 1 capped at D, mean ≈ (1 − p)/p), 'per_actor' (N actors
    round-robin, actor i refreshed every N steps, so d cycles through 0..N−1 scaled by D/N).
    Always d_t ≤ t (no actor runs ahead of step 0). D > 0 needs a kind other than 'none' (a delay
    with no kind would silently run the synchronous loop). ``admission`` and ``budget`` (None: no
    budget, every rollout admitted as it is) as in the module docstring.
    """

    kind: str = "none"
    D: int = 0  # maximum delay, ≥ 0
    p: float = 0.5  # geometric success probability in (0, 1]
    n_actors: int = 1  # per_actor: number of actors, ≥ 1
    admission: str = "pace"  # 'pace' | 'drop' | 'mask' (with a budget)
    budget: int | None = None  # staleness budget b ≥ 0; None = none

    def __post_init__(self) -> None:
        check_choice("staleness kind", self.kind, DELAY_KINDS)
        check_int("D", self.D, low=0)
        check_range("p", self.p, low=0.0, high=1.0, low_open=True)
        check_int("n_actors", self.n_actors, low=1)
        if self.kind == "none" and self.D > 0:
            kinds = ", ".join(k for k in DELAY_KINDS if k != "none")
            raise ValueError(f"staleness D={self.D} needs a kind: set staleness.kind to one of {kinds} "
                             "(kind 'none' is the synchronous loop)")
        check_choice("admission", self.admission, ADMISSIONS)
        if self.budget is not None:
            check_int("budget", self.budget, low=0)
        elif self.admission != "pace":  # without a budget every rollout would be admitted, silently
            raise ValueError(f"staleness admission={self.admission!r} needs a budget: set staleness.budget to an "
                             "int ≥ 0 (the largest staleness admitted)")

    @classmethod
    def from_dict(cls, fields: dict | DelaySchedule | None) -> DelaySchedule:
        """The schedule of ``RunConfig.staleness`` ({} or None: synchronous); unknown or mistyped
        fields raise one ``ValueError`` line."""
        if isinstance(fields, DelaySchedule):
            return fields
        fields = dict(fields or {})
        known = {f.name for f in dataclasses.fields(cls)}
        if set(fields) - known:
            raise ValueError(f"unknown field(s) {sorted(set(fields) - known)}; valid: {sorted(known)}")
        check_field_types(cls, fields)
        return cls(**fields)

    @property
    def paces(self) -> bool:
        return self.budget is not None and self.admission == "pace"

    @property
    def max_delay(self) -> int:
        d = 0 if self.kind == "none" else int(self.D)
        return min(d, self.budget) if self.paces else d

    def admit(self, rollout: Rollout, step: int) -> tuple[Rollout, Tensor | None]:
        """The rollout as the learner admits it at ``step`` and, for 'drop' and 'mask', the fraction of
        its prompts (groups) ``[*P]`` with no admitted token (None when nothing is filtered).

        drop: m ← m ∧ [max_t (step − version) ≤ b] per row; mask: m ← m ∧ [step − version ≤ b] per token."""
        check_range("step", step, low=0)
        if self.budget is None or self.admission == "pace":
            return rollout, None
        fresh = rollout.staleness(step) <= self.budget
        if self.admission == "drop":
            fresh = (fresh | ~rollout.mask).all(-1, keepdim=True)
        mask = rollout.mask & fresh
        shape = rollout.mask.shape[:-1]
        groups, index = int(rollout.group.max()) + 1, rollout.group.expand(shape)
        rows = torch.zeros(*shape[:-1], groups, dtype=torch.float64).scatter_add_(
            -1, index, torch.ones(shape, dtype=torch.float64))
        reached = torch.zeros_like(rows).scatter_add_(-1, index, mask.any(-1).to(torch.float64))
        dropped = ((rows > 0) & (reached == 0)).sum(-1) / (rows > 0).sum(-1)
        return rollout.replace(mask=mask), dropped.to(torch.float64)

    def delay(self, step: int, seed: int) -> int:
        """d_t for learner step ``step`` (drawn from a generator derived from (seed, step))."""
        if self.kind == "none" or self.D == 0:
            d = 0
        elif self.kind == "fixed":
            d = self.D
        elif self.kind == "uniform":
            d = int(torch.randint(0, self.D + 1, (1,), generator=derived_generator(seed, "delay", step)))
        elif self.kind == "geometric":
            u = float(torch.rand(1, generator=derived_generator(seed, "delay", step), dtype=torch.float64))
            d = 0 if self.p == 1 else min(self.D, int(math.floor(math.log1p(-u) / math.log1p(-self.p))))
        else:  # per_actor: actor (t mod N) last refreshed (t mod N)·D/N steps ago
            d = (step % self.n_actors) * self.D // max(self.n_actors, 1)
        if self.paces:
            d = min(d, self.budget)
        return min(d, step)
