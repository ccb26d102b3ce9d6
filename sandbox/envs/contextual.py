"""The contextual-environment contract of the categorical family (bandits, contaminated MNIST): a
context x in, one of K actions out, reward R(x, a) (default 1[a = y(x)]); no model.

An environment holds the state of S seeds (``population``; e.g. each seed's correct arms), drawn
by ``reset`` from the task's generator before the policy's parameters. Contexts are ids ``[S, n]``;
``features`` is what the policy sees of them (the ids themselves, or pixels). The task composes it
with a categorical policy (``sandbox.policies.categorical``) and an objective through
``ContextualEnvironment``, the family's ``Environment``: rows are ``samples_per_context`` draws for
each of ``batch_size`` contexts, grouped as the problem says (``enumerated``: the K actions of each
of the problem's enumerated contexts).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import Tensor

from sandbox.core.rollout import Rollout
from sandbox.envs.base import Batch, Contexts, Environment, ObservationSpec


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

    @property
    @abstractmethod
    def spec(self) -> ObservationSpec:
        """What ``features`` shows: ids of a finite table (``ContextIdSpec``) or vectors
        (``ContextVectorSpec``), with the number of actions (``sandbox.core.observations``)."""

    @abstractmethod
    def features(self, contexts: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """What the policy sees of contexts ``[S, n]``: ids, or ``[S, n, d]`` inputs of ``dtype``."""

    @abstractmethod
    def evaluate(self, logits_of: Callable[[Tensor], Tensor], dtype: torch.dtype) -> dict[str, Tensor]:
        """Metrics ``[S]`` (``error`` first) of the policy whose logits of features are ``logits_of``."""


class ContextualEnvironment(Environment):
    """A ``ContextualEnv`` (``env``) as an ``Environment``: ``batch_size`` contexts a step, each
    ``samples_per_context`` times (``enumerated``: every action of each enumerated context)."""

    def __init__(self, env: ContextualEnv, batch_size: int, samples_per_context: int, enumerated: bool) -> None:
        self.env, self.batch_size, self.samples_per_context, self.enumerated = env, batch_size, samples_per_context, enumerated

    @property
    def population(self) -> int:
        return self.env.population

    @property
    def reward_range(self) -> tuple[float, float]:
        return self.env.reward_range

    def reset(self, generator):
        self.env.reset(generator)

    def draw_batch(self, generator):
        if self.enumerated:  # every action of each context is enumerated
            contexts = self.env.enumerated_contexts(self.batch_size, generator)
            return Batch(obs=contexts, rows=contexts, group=torch.arange(contexts.shape[-1]))
        n, m = self.batch_size, self.samples_per_context
        contexts = self.env.sample_contexts(n, generator).repeat_interleave(m, dim=-1)  # [S, n·m]
        return Batch(obs=contexts, rows=contexts, group=self.env.group_ids(contexts, m))

    @property
    def spec(self) -> ObservationSpec:
        return self.env.spec

    def observe(self, obs, extras):
        run = self.env.n_actions if self.enumerated else self.samples_per_context
        return Contexts(obs, self.env.features, run, self.enumerated)

    def enumerated_rollout(self, batch: Batch, true_logp: Tensor, reported_logp: Tensor, version: int) -> Rollout:
        """Every action of each of the batch's ``n`` contexts as a row (rows ``n·K``, T = 1), with the
        log-probs μ the exact objective computed (``sandbox.objectives.exact``) and each row's reward
        from the reward table: the rollout ``objective='exact'`` differentiates."""
        contexts = batch.obs
        (S, n), K = contexts.shape, self.env.n_actions
        return Rollout(
            obs=contexts.repeat_interleave(K, dim=-1),
            actions=torch.arange(K).repeat(n).expand(S, n * K).unsqueeze(-1),
            mask=torch.ones(S, n * K, 1, dtype=torch.bool),
            behavior_logp=reported_logp,
            true_behavior_logp=true_logp,
            rewards=self.env.reward_table(contexts).to(true_logp.dtype).reshape(S, n * K),
            group=torch.arange(n).repeat_interleave(K),
            version=torch.full((S, n * K, 1), int(version), dtype=torch.long),
            extras={"labels": self.env.labels(contexts).repeat_interleave(K, dim=-1)},
        )

    def correct_answers(self, batch):
        return self.env.labels(batch.obs).unsqueeze(-1)

    def wrong_answers(self, batch):
        return self.env.wrong_labels(batch.obs).unsqueeze(-1)

    def reward(self, batch, actions, generator):
        return self.env.sample_rewards(batch.obs, actions[..., 0], generator)

    def rollout_extras(self, batch, correct, frictions):
        return {"labels": correct[..., 0]}

    def target(self, extras):
        return extras["labels"].unsqueeze(-1)

    def evaluate(self, policy, params, generator):
        return self.env.evaluate(lambda features: policy.logits(params, features), params[0].dtype)


__all__ = ["ContextualEnv", "ContextualEnvironment"]
