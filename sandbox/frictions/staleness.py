"""Staleness: the actor samples with the learner's parameters from d_t steps ago.

A delay schedule gives d_t for every learner step t; ``sandbox.runtime.history`` keeps the
parameter versions (or the eagerly sampled rollouts) that the schedule needs. D = 0 reproduces the
synchronous loop bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_choice, check_int, check_range

DELAY_KINDS = ("none", "fixed", "uniform", "geometric", "per_actor")


@dataclass(frozen=True)
class DelaySchedule:
    """Delay d_t of the actor behind the learner.

    kind: 'none' (d = 0, the synchronous loop), 'fixed' (d = D), 'uniform' (d ~ U{0..D}),
    'geometric' (d ~ Geometric(p) − 1 capped at D, mean ≈ (1 − p)/p), 'per_actor' (N actors
    round-robin, actor i refreshed every N steps, so d cycles through 0..N−1 scaled by D/N).
    Always d_t ≤ t (no actor runs ahead of step 0).
    """

    kind: str = "none"
    D: int = 0  # maximum delay, ≥ 0
    p: float = 0.5  # geometric success probability in (0, 1]
    n_actors: int = 1  # per_actor: number of actors, ≥ 1

    def __post_init__(self) -> None:
        check_choice("staleness kind", self.kind, DELAY_KINDS)
        check_int("D", self.D, low=0)
        check_range("p", self.p, low=0.0, high=1.0, low_open=True)
        check_int("n_actors", self.n_actors, low=1)

    @property
    def max_delay(self) -> int:
        return 0 if self.kind == "none" else int(self.D)

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
        return min(d, step)
