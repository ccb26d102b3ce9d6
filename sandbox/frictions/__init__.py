"""Frictions of distributed RL — staleness, actor bugs, reward corruption, rare discovery — as
composable, seeded wrappers with a strength knob (strength 0 is the identity)."""

from sandbox.frictions import (  # noqa: F401  (registers)
    actor_bugs,
    discovery,
    measured,
    partial,
    precision,
    rewards,
    truncation,
)
from sandbox.frictions.base import (
    FRICTIONS,
    Friction,
    FrictionContext,
    FrictionStack,
    Sample,
    make_friction,
    register_friction,
)
from sandbox.frictions.staleness import DelaySchedule

__all__ = [
    "FRICTIONS",
    "DelaySchedule",
    "Friction",
    "FrictionContext",
    "FrictionStack",
    "Sample",
    "make_friction",
    "register_friction",
]
