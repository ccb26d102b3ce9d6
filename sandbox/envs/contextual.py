"""The contextual-environment contract of the categorical family (bandits, contaminated MNIST): a
context x in, one of K actions out, reward R(x, a) (default 1[a = y(x)]); no model.

An environment holds the state of S seeds (``population``; e.g. each seed's correct arms), drawn
by ``reset`` from the task's generator before the policy's parameters. Contexts are ids ``[S, n]``;
``features`` is what the policy sees of them (the ids themselves, or pixels). The task composes it
with a categorical policy (``sandbox.policies.categorical``) and an objective
(``sandbox.tasks.categorical.CategoricalTask``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import Tensor


class ContextualEnv(ABC):
    """Contexts, labels, rewards and the evaluation of a K-action contextual bandit over S seeds."""

    population: int
    n_actions: int
    #: bounds of the reward (frictions that corrupt rewards stay inside them)
    reward_range: tuple[float, float] = (0.0, 1.0)
    #: dtype of the reward table (None: torch's default dtype)
    dtype: torch.dtype | None = None

    def reset(self, generator: torch.Generator) -> None:
        """Draw the seeds' state (e.g. correct arms) from ``generator``; before the policy's init
        (default: no state)."""
        return None

    @abstractmethod
    def sample_contexts(self, n: int, generator: torch.Generator) -> Tensor:
        """Context ids ``[S, n]``."""

    def enumerated_contexts(self, n: int, generator: torch.Generator) -> Tensor:
        """The contexts whose every action ``mode='exact'`` enumerates (default: ``n`` drawn ones)."""
        return self.sample_contexts(n, generator)

    @abstractmethod
    def labels(self, contexts: Tensor) -> Tensor:
        """Correct action per context ``[S, n]``."""

    def wrong_labels(self, contexts: Tensor) -> Tensor:
        """The fixed wrong answer used by the landmine bug: (y + 1) mod K."""
        return (self.labels(contexts) + 1) % self.n_actions

    def reward_table(self, contexts: Tensor) -> Tensor:
        """Expected reward of every action ``[S, n, K]`` (default 1[a = y])."""
        dtype = self.dtype or torch.get_default_dtype()
        return torch.nn.functional.one_hot(self.labels(contexts), self.n_actions).to(dtype)

    def sample_rewards(self, contexts: Tensor, actions: Tensor, generator: torch.Generator) -> Tensor:
        """Rewards of the sampled actions ``[S, n]`` (default: deterministic table lookup)."""
        return self.reward_table(contexts).gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def group_ids(self, contexts: Tensor, samples_per_context: int) -> Tensor:
        """Group of each row ``[B]`` for group baselines (default: the ``samples_per_context`` rows of
        one context draw form a group); environments with a few contexts group by context id."""
        return torch.arange(contexts.shape[-1] // samples_per_context).repeat_interleave(samples_per_context)

    def oracle_contexts(self, contexts: Tensor) -> Tensor:
        """The contexts the oracles average over, given the batch's distinct ones (default: those)."""
        return contexts

    @abstractmethod
    def features(self, contexts: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """What the policy sees of contexts ``[S, n]``: ids, or ``[S, n, d]`` inputs of ``dtype``."""

    @abstractmethod
    def evaluate(self, logits_of: Callable[[Tensor], Tensor], dtype: torch.dtype) -> dict[str, Tensor]:
        """Metrics ``[S]`` (``error`` first) of the policy whose logits of features are ``logits_of``."""


__all__ = ["ContextualEnv"]
