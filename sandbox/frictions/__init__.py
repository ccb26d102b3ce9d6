"""Frictions of distributed RL — staleness, actor bugs, reward corruption, rare discovery — as
composable, seeded wrappers with a strength knob (strength 0 is the identity)."""

from sandbox.frictions import (  # noqa: F401  (registers)
    actor_bugs,
    discovery,
    measured,
    partial,
    precision,
    rewards,
    rounding,
    truncation,
)
from sandbox.frictions.admissions import ADMISSION_RULES, Admission, register_admission
from sandbox.frictions.base import (
    FRICTIONS,
    Friction,
    FrictionContext,
    FrictionStack,
    Sample,
    make_friction,
    register_friction,
)
from sandbox.frictions.delays import DELAYS, Delay, register_delay
from sandbox.frictions.staleness import DelaySchedule

__all__ = [
    "ADMISSION_RULES",
    "DELAYS",
    "FRICTIONS",
    "Admission",
    "Delay",
    "DelaySchedule",
    "Friction",
    "FrictionContext",
    "FrictionStack",
    "Sample",
    "make_friction",
    "register_admission",
    "register_delay",
    "register_friction",
]
