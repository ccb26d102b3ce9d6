# run: sandbox run --plugin FILE --set task=bandit --set task_kwargs.N=20 --set task_kwargs.policy=low_rank --set task_kwargs.policy_kwargs.rank=4 --set estimator=reinforce --set lr=0.1 --set steps=200
"""A contextual (bandit) policy in one file: a low-rank softmax over K arms, z(x, a) = U[x]·V[a] + b[a]
— rank r instead of the tabular policy's N·K logits.

It is a ``CategoricalPolicy`` (``sandbox.policies.categorical``): ``init`` over a population of seeds
and ``logits`` of the context ids; sampling, scoring and the exact mode come with the contract. It
reads context ids (``reads``), so the bandits train it by name, ``task_kwargs.policy=low_rank``,
built from the environment's spec as ``LowRankSoftmax(n_contexts=N, n_actions=K, dtype=,
**policy_kwargs)``; the first line trains it on 20 contexts × 10 arms.
"""

from dataclasses import dataclass

import torch

from sandbox.core.observations import ContextIdSpec
from sandbox.policies import register_policy
from sandbox.policies.categorical import CategoricalPolicy


@register_policy("low_rank")
@dataclass(frozen=True)
class LowRankSoftmax(CategoricalPolicy):
    """π(a | x) = softmax_a(U[x]·V[a] + b[a]) with U [N, r], V [K, r], b [K] per seed."""

    n_contexts: int
    n_actions: int
    dtype: torch.dtype = torch.float32
    rank: int = 2

    reads = (ContextIdSpec,)  # ids of a finite table of contexts (the bandits)

    def init(self, population, generator):
        U, V = (0.1 * torch.randn(population, n, self.rank, generator=generator, dtype=self.dtype)
                for n in (self.n_contexts, self.n_actions))
        return [U, V, torch.zeros(population, self.n_actions, dtype=self.dtype)]

    def logits(self, params, contexts):
        U, V, b = params  # contexts [S, n] → U[x] [S, n, r]
        u = U.gather(1, contexts.unsqueeze(-1).expand(*contexts.shape, self.rank))
        return torch.einsum("snr,skr->snk", u, V) + b[:, None]
