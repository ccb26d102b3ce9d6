"""The ``Environment`` protocol: one interface for every environment family (the bandits and
contaminated MNIST, the sequence problems, the text problems), over S seeds; no model, no learner.

    reset(generator)                          the seeds' state (correct arms, a prompt pool …)
    draw_batch(generator) → Batch             the contexts or prompts of one step
    spec → ObservationSpec                    what it shows (the sizes a policy is built from)
    observe(obs, extras) → what the policy conditions on
    correct_answers / wrong_answers(batch)    what frictions may know (``[*P, B, T]`` tokens)
    reward(batch, actions, generator)         rewards ``[*P, B]``
    evaluate(policy, params, generator)       metrics ``[S]`` of a policy (``error`` first)

A family's raw problems keep their own small contracts (``ContextualEnv``, ``SequenceEnv``,
``TextEnv``: one file per problem); one ``Environment`` per family composes them with the batch
layout the task's knobs choose (``sandbox.envs.contextual``, ``sandbox.envs.sequences.environment``,
``sandbox.envs.text_environment``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from sandbox.core.observations import Contexts, ObservationSpec, Prompts, TextPrompts


@dataclass
class Batch:
    """What the environment drew for one step: ``obs`` (what the policy conditions on: context ids,
    images, prompts), ``rows`` (the context of each of the B rows, for rewards and frictions),
    ``group`` (baseline group per row) and environment-specific ``extras``."""

    obs: Any
    rows: Any
    group: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


class Environment(ABC):
    """An environment family (module docstring)."""

    population: int
    #: bounds of the reward (frictions that corrupt rewards stay inside them)
    reward_range: tuple[float, float] = (0.0, 1.0)
    #: the seeds' state is drawn before the policy's parameters (False: after them)
    state_first: ClassVar[bool] = True
    #: the run's device (set by the task): random draws stay on the CPU generators, tensors move here
    device: torch.device = torch.device("cpu")

    @property
    @abstractmethod
    def spec(self) -> ObservationSpec:
        """What it shows a policy (``sandbox.core.observations``): the sizes a policy family is
        built from, and the kind a family must read to be chosen on it."""

    def reset(self, generator: torch.Generator) -> None:
        """Draw the seeds' state from the task's ``generator`` (default: no state)."""
        return None

    @abstractmethod
    def draw_batch(self, generator: torch.Generator) -> Batch:
        """The contexts of one step."""

    def observe(self, obs: Any, extras: dict[str, Any]) -> Any:
        """What the policy conditions on, from a batch's or a rollout's ``obs`` and ``extras``."""
        return obs

    @abstractmethod
    def correct_answers(self, batch: Batch) -> Tensor:
        """A correct answer per row, ``[*P, B, T]``."""

    @abstractmethod
    def wrong_answers(self, batch: Batch) -> Tensor:
        """The fixed wrong answer per row (the landmine bug's), ``[*P, B, T]``."""

    @abstractmethod
    def reward(self, batch: Batch, actions: Tensor, generator: torch.Generator) -> Tensor:
        """Rewards ``[*P, B]`` of ``actions [*P, B, T]``."""

    def token_mask(self, batch: Batch, actions: Tensor) -> Tensor:
        """Valid tokens ``[*P, B, T]`` (default: all)."""
        return torch.ones(actions.shape, dtype=torch.bool, device=actions.device)

    def rollout_extras(self, batch: Batch, correct: Tensor, frictions: bool) -> dict[str, Tensor]:
        """Tensors the learner or the diagnostics need of the batch (default: the batch's
        ``extras``); ``correct`` are the correct answers, ``frictions`` whether any friction runs."""
        return dict(batch.extras)

    def target(self, extras: dict[str, Any]) -> Tensor | None:
        """The supervised target's tokens of a rollout (for ``target_logp``), or None."""
        return None

    @abstractmethod
    def evaluate(self, policy: Any, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """Metrics of ``policy`` at ``params`` (detached), each ``[S]``."""

    def state_dict(self) -> dict[str, Any]:
        """State drawn at ``reset`` (restored by checkpoints)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


__all__ = ["Batch", "Contexts", "Environment", "ObservationSpec", "Prompts", "TextPrompts"]
