"""Delay kinds: how far d_t the actor of learner step t runs behind, one registered class each.

A delay kind is a frozen dataclass registered in ``DELAYS`` (``@register_delay("name")``) with
``draw(step, seed) → d_t`` (0 ≤ d_t ≤ ``maximum``, drawn from a generator derived from (seed,
step) so that every runtime draws the same d_t) and ``maximum`` (the largest d_t it gives: the
stale copies a runtime must keep). ``DelaySchedule`` (``sandbox.frictions.staleness``) composes one
with an admission rule and the broadcast period; ``RunConfig.staleness = {"kind": "name", …}``
selects it. Capabilities are class attributes: ``delays`` (False: the kind never delays, so a
``D`` > 0 with it is an error rather than a silent synchronous run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from sandbox.core.registry import Registry
from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_int, check_range

DELAYS: Registry[Delay] = Registry("staleness kind")


def register_delay(name: str, *, replace: bool = False):
    """``@register_delay("name")`` above ``@dataclass(frozen=True)``: a new delay kind."""
    return DELAYS.register(name, replace=replace)


def delay_kinds() -> tuple[str, ...]:
    """The registered delay kinds, built-ins first, in the order they were registered."""
    return DELAYS.in_order()


@dataclass(frozen=True)
class Delay:
    """Base class: d_t = 0. ``D`` is the largest delay (≥ 0)."""

    name: ClassVar[str] = "delay"
    #: False for a kind that never delays (a D > 0 with it is refused)
    delays: ClassVar[bool] = True

    D: int = 0

    def __post_init__(self) -> None:
        check_int("D", self.D, low=0)

    @property
    def maximum(self) -> int:
        """The largest d_t this kind gives."""
        return int(self.D) if self.delays else 0

    def draw(self, step: int, seed: int) -> int:
        """d_t for learner step ``step`` of the run with ``seed`` (before any pacing or cap at t)."""
        return 0

    def check_steps(self, steps: int) -> None:
        """Refuse a run of ``steps`` steps that this kind would never delay (default: nothing to check)."""


@register_delay("none")
@dataclass(frozen=True)
class NoDelay(Delay):
    """d = 0: the synchronous loop."""

    delays: ClassVar[bool] = False


@register_delay("fixed")
@dataclass(frozen=True)
class FixedDelay(Delay):
    """d = D at every step."""

    def draw(self, step: int, seed: int) -> int:
        return int(self.D)


@register_delay("uniform")
@dataclass(frozen=True)
class UniformDelay(Delay):
    """d ~ U{0..D}, independently per step."""

    def draw(self, step: int, seed: int) -> int:
        if self.D == 0:
            return 0
        return int(torch.randint(0, self.D + 1, (1,), generator=derived_generator(seed, "delay", step)))


@register_delay("geometric")
@dataclass(frozen=True)
class GeometricDelay(Delay):
    """d ~ Geometric(p) − 1 capped at D (mean ≈ (1 − p)/p): d = ⌊log(1 − u)/log(1 − p)⌋, u ~ U[0, 1)."""

    p: float = 0.5  # success probability in (0, 1]

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("p", self.p, low=0.0, high=1.0, low_open=True)

    def draw(self, step: int, seed: int) -> int:
        if self.D == 0:
            return 0
        u = float(torch.rand(1, generator=derived_generator(seed, "delay", step), dtype=torch.float64))
        return 0 if self.p == 1 else min(self.D, int(math.floor(math.log1p(-u) / math.log1p(-self.p))))


@register_delay("per_actor")
@dataclass(frozen=True)
class PerActorDelay(Delay):
    """N actors round-robin, actor i refreshed every N steps: d = (t mod N)·D // N."""

    n_actors: int = 1  # N ≥ 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("n_actors", self.n_actors, low=1)

    def draw(self, step: int, seed: int) -> int:
        return (step % self.n_actors) * self.D // self.n_actors

    def check_steps(self, steps: int) -> None:
        """D > 0 that never delays within the run would be a synchronous run under a stale name: d_t
        is 0 for every t < min(steps, N) when (min(steps, N) − 1)·D < N."""
        if self.D == 0 or steps == 0:
            return
        n, D = self.n_actors, self.D
        if (min(steps, n) - 1) * D // n == 0:
            raise ValueError(f"staleness: per_actor with n_actors={n}, D={D} and steps={steps} never delays (d_t = "
                             f"(t mod n_actors)·D // n_actors is 0 at every step): a synchronous run; it delays when "
                             f"n_actors ≥ 2, D ≥ 2 and n_actors ≤ D·(steps − 1)")


__all__ = ["DELAYS", "Delay", "FixedDelay", "GeometricDelay", "NoDelay", "PerActorDelay", "UniformDelay",
           "delay_kinds", "register_delay"]
