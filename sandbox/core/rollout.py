"""The Rollout contract: what an actor produces and a learner consumes (DESIGN.md, Contracts)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from jaxtyping import Bool, Float, Int
from torch import Tensor

from sandbox.core.validation import check_shape, check_tensor


@dataclass(frozen=True)
class Rollout:
    """A batch of actor samples. Shapes ``[*P, B, T]`` per token, ``[*P, B]`` per sequence
    (single-step environments use T = 1).

    Attributes:
        obs: environment-specific context (image, prompt tokens, context index).
        actions: sampled tokens.
        mask: valid tokens.
        behavior_logp: log μ as the actor *reported* it (wrong under an actor bug).
        true_behavior_logp: log-prob under what the actor really sampled from (diagnostics only).
        rewards: ``[*P, B]`` or ``[*P, B, T]``.
        group: prompt/context id per sequence, for group baselines.
        version: learner step whose parameters produced each token (staleness = step − version).
        extras: environment-specific tensors (labels for the supervised oracle, …).

    Rewards and log-probs may hold NaN/inf: a population member whose rollout does has diverged,
    and the learner freezes that member alone (``ActorLearner.update``) instead of stopping all.
    """

    obs: Any
    actions: Int[Tensor, "*P B T"]
    mask: Bool[Tensor, "*P B T"]
    behavior_logp: Float[Tensor, "*P B T"]
    true_behavior_logp: Float[Tensor, "*P B T"]
    rewards: Float[Tensor, "*P B"] | Float[Tensor, "*P B T"]
    group: Int[Tensor, "*P B"] | Int[Tensor, " B"]
    version: Int[Tensor, "*P B T"]
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_tensor("actions", self.actions, dtype="int")
        shape = tuple(self.actions.shape)
        if len(shape) < 2:
            raise ValueError(f"actions must have shape [*P, B, T], got {shape}")
        check_tensor("mask", self.mask, dtype="bool")
        check_shape("mask", self.mask, shape, "actions")
        for name in ("behavior_logp", "true_behavior_logp"):
            check_tensor(name, getattr(self, name), dtype="float", finite=False)
            check_shape(name, getattr(self, name), shape, "actions")
        check_tensor("rewards", self.rewards, dtype="float", finite=False)
        if tuple(self.rewards.shape) not in (shape, shape[:-1]):
            raise ValueError(f"rewards must have shape {shape[:-1]} or {shape}, got {tuple(self.rewards.shape)}")
        check_tensor("group", self.group, dtype="int")
        if tuple(self.group.shape) not in (shape[:-1], shape[-2:-1]):
            raise ValueError(f"group must have shape {shape[:-1]} or {shape[-2:-1]}, got {tuple(self.group.shape)}")
        check_tensor("version", self.version, dtype="int")
        check_shape("version", self.version, shape, "actions")

    def staleness(self, step: int) -> Tensor:
        """Per-token staleness ``step − version``."""
        return step - self.version

    def replace(self, **changes: Any) -> Rollout:
        return dataclasses.replace(self, **changes)
