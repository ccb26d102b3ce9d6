"""Bandits with exact quantities, vectorised over seeds (shared/spec/environments.md, "Bandits").

Single-context K-armed (N = 1) and multi-context (N contexts × K arms) bandits with one correct
arm per context, R = 1[a = y_n], tabular softmax policy z ∈ R^{S×N×K}; and the Gaussian
"gambling" bandit (arm 0 pays 1, arm 1 pays N(μ, σ²)), a negative control for surprisal gating.

Exact quantities, in logit space, no sampling: J(z) = mean_n p_n with p_n = π_n(y_n);
∇J ∝ ⊕_n p_n·(e_{y_n} − π_n); the CE oracle ⊕_n (e_{y_n} − π_n); and the exact expected update of
any per-token estimator, E_{a∼μ}[g(a)] = Σ_a μ(a)·g(a), by enumerating actions.

``BanditEnv`` and ``GaussianBanditEnv`` are these bandits as contextual environments
(``sandbox.envs.contextual``): the tasks ``bandit`` and ``gaussian_bandit`` compose them with the
tabular policy (``sandbox.tasks.bandits``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.observations import ContextIdSpec
from sandbox.envs.contextual import ContextualEnv

# ----------------------------------------------------------------------------- closed forms


def expected_return(logits: Tensor, labels: Tensor) -> Tensor:
    """J = mean_n π_n(y_n), ``logits [S, N, K]``, ``labels [S, N]`` → ``[S]``."""
    return torch.softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1).mean(-1)


def exact_pg(logits: Tensor, labels: Tensor) -> Tensor:
    """∇_z J·N = ⊕_n p_n (e_{y_n} − π_n), ``[S, N, K]`` (the 1/N factor dropped)."""
    probs = torch.softmax(logits, -1)
    onehot = torch.nn.functional.one_hot(labels, logits.shape[-1]).to(probs.dtype)
    p = probs.gather(-1, labels.unsqueeze(-1))
    return p * (onehot - probs)


def ce_oracle(logits: Tensor, labels: Tensor) -> Tensor:
    """⊕_n (e_{y_n} − π_n), ``[S, N, K]``."""
    probs = torch.softmax(logits, -1)
    return torch.nn.functional.one_hot(labels, logits.shape[-1]).to(probs.dtype) - probs


# ----------------------------------------------------------------------------- environments
@dataclass
class BanditEnv(ContextualEnv):
    """N contexts × K arms, one correct arm per context and seed (``label_table [S, N]``, drawn by
    ``reset``), R = 1[a = y_n]. Contexts are uniform; rows of one context id form a group; mode='exact'
    enumerates every context; the oracles average over all of them."""

    population: int
    N: int
    K: int
    dtype: torch.dtype = torch.float32
    label_table: Tensor | None = field(default=None, repr=False)  # correct arm per seed and context [S, N]

    @property
    def n_actions(self) -> int:
        return self.K

    def reset(self, generator):
        self.label_table = torch.randint(0, self.K, (self.population, self.N), generator=generator)

    def all_contexts(self) -> Tensor:
        return torch.arange(self.N).expand(self.population, self.N)

    def sample_contexts(self, n, generator):
        if self.N == 1:
            return torch.zeros(self.population, n, dtype=torch.long)
        return torch.randint(0, self.N, (self.population, n), generator=generator)

    def enumerated_contexts(self, n, generator):
        return self.all_contexts()

    def labels(self, contexts):
        if self.label_table is None:
            raise ValueError("call init_params first: the correct arms are drawn with the parameters")
        return self.label_table.gather(1, contexts)

    def group_ids(self, contexts, samples_per_context):
        """Rows that share a context id form a group (all rows, when N = 1)."""
        return contexts

    def oracle_contexts(self, contexts):
        return self.all_contexts()

    @property
    def spec(self) -> ContextIdSpec:
        return ContextIdSpec(self.N, self.K, self.dtype)

    def features(self, contexts, dtype=torch.float32):
        return contexts

    def evaluate(self, logits_of: Callable[[Tensor], Tensor], dtype: torch.dtype) -> dict[str, Tensor]:
        """error = 1 − J, J = mean_n π_n(y_n) (exact)."""
        contexts = self.all_contexts()
        return {"error": 1 - expected_return(logits_of(self.features(contexts)), self.labels(contexts))}


@dataclass
class GaussianBanditEnv(BanditEnv):
    """Two arms: arm 0 pays 1, arm 1 pays N(mu, sigma²) — the gambling arm. The better arm in
    expectation is the correct one; a negative control where gating on surprisal can hurt."""

    mu: float = 0.9  # mean payoff of the gambling arm
    sigma: float = 1.0  # its standard deviation, ≥ 0

    @property
    def reward_range(self) -> tuple[float, float]:
        return (min(0.0, self.mu - 3 * self.sigma), max(1.0, self.mu + 3 * self.sigma))

    def reset(self, generator):
        super().reset(generator)  # the draw a plain bandit makes, so that the policy's init is the same
        self.label_table = torch.full((self.population, self.N), 0 if self.mu < 1 else 1, dtype=torch.long)

    def reward_table(self, contexts):
        table = torch.tensor([1.0, self.mu], dtype=self.dtype)
        return table.expand(*contexts.shape, 2)

    def sample_rewards(self, contexts, actions, generator):
        noise = torch.randn(actions.shape, generator=generator, dtype=self.dtype)
        return torch.where(actions == 0, torch.ones_like(noise), self.mu + self.sigma * noise)

    def evaluate(self, logits_of, dtype):
        """error = 1 − π(better arm); regret = max_a E R(a) − Σ_a π(a)·E R(a)."""
        contexts = self.all_contexts()
        probs = torch.softmax(logits_of(self.features(contexts)), -1)
        values = self.reward_table(contexts).to(probs.dtype)
        return {**super().evaluate(logits_of, dtype), "regret": (values.max(-1).values - (probs * values).sum(-1)).mean(-1)}


__all__ = ["BanditEnv", "GaussianBanditEnv", "ce_oracle", "exact_pg", "expected_return"]
