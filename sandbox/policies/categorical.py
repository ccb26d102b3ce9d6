"""The categorical-policy contract: logits over K actions of a context's features, for a population
of S independent members (parameters ``[S, ...]``, a list of tensors that live outside the policy).

Implemented by the tabular softmax (``sandbox.policies.tabular``, features = context ids) and the
MLP (``sandbox.policies.mlp``, features = pixels); a ``Policy`` (``sandbox.policies.base``) over
the ``Contexts`` a contextual environment shows (``sandbox.envs.contextual``): one position, T = 1,
π(a|x) = softmax(z(x))_a (τ = 1).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.observations import ContextIdSpec, ContextVectorSpec
from sandbox.policies.base import Policy, PolicySample, Scored
from sandbox.policies.decode import Versions, decode, fresh, teacher_forced


class CategoricalPolicy(Policy):
    """init → params ``[S, ...]``; ``logits(params, features)`` → ``[S, n, K]``."""

    reads = (ContextIdSpec, ContextVectorSpec)

    #: a forward per row costs: rows that come in runs of one context are computed once per run
    once_per_context: ClassVar[bool] = False
    #: mode='exact' scores the K enumerated rows of a context from one ``log_probs`` of it (else:
    #: from the logits of every row)
    scores_enumerated_contexts: ClassVar[bool] = False

    @abstractmethod
    def init(self, population: int, generator: torch.Generator) -> list[Tensor]:
        """Initial parameters of ``population`` independent members, drawn from ``generator``."""

    @abstractmethod
    def logits(self, params: Sequence[Tensor], features: Tensor) -> Tensor:
        """``[S, n, K]`` logits of features ``[S, n, …]``."""

    def context_logits(self, params: Sequence[Tensor], obs) -> Tensor:
        """``[S, R, K]`` for the ``Contexts`` ``obs``. A policy computed ``once_per_context`` runs once
        per run of identical contexts (a context's samples, or its enumerated actions; checked first)."""
        contexts, r = obs.ids, obs.run
        dtype = params[0].dtype
        if self.once_per_context and r > 1 and contexts.shape[-1] % r == 0:
            distinct = contexts[..., ::r]
            if torch.equal(distinct.repeat_interleave(r, -1), contexts):
                return self.logits(params, obs.features(distinct, dtype)).repeat_interleave(r, -2)
        return self.logits(params, obs.features(contexts, dtype))

    def sample(self, params, obs, chain, generator, versions=None):
        # one position, whose distribution no token precedes: any action is scored by the drawn one
        one = Versions.single(params, 1)
        out = decode(lambda p, _: self.context_logits(p, obs), one, chain, fresh(generator), obs.ids.shape, keep=True)
        return PolicySample(out.actions, out.logp, teacher_forced(lambda p, a: out.log_probs, one, out))

    def score(self, params, obs, actions):
        return torch.log_softmax(self.context_logits(params, obs), -1).gather(-1, actions)

    def scored(self, params, obs, actions, target=None):
        """log π of the actions and of the labels ``target`` from one log π(·|x), with the
        probabilities and the per-row gradient norms as lazy providers (for baselines)."""
        if obs.enumerated and self.scores_enumerated_contexts:
            return self._score_enumerated(params, obs, target)
        log_probs = torch.log_softmax(self.context_logits(params, obs), -1)  # [S, R, K]
        return Scored(
            logp=log_probs.gather(-1, actions),  # [S, R, 1]
            target_logp=None if target is None else log_probs.gather(-1, target),
            providers={
                "probs": lambda: log_probs.detach().exp(),
                "grad_sq_norms": lambda: self.grad_sq_norms(params, obs.features(obs.ids, params[0].dtype), actions[..., 0]),
            },
        )

    def _score_enumerated(self, params, obs, target):
        """Every (context, action) row from one log π(·|x) per context: rows n·K in context order."""
        K = obs.run
        log_probs = self.log_probs(params, obs.features(obs.ids[:, ::K], params[0].dtype))  # [S, n, K]
        S, n, _ = log_probs.shape
        return Scored(
            logp=log_probs.reshape(S, n * K, 1),
            target_logp=None if target is None else log_probs.gather(-1, target[:, ::K]).repeat_interleave(K, dim=1),
            providers={"probs": lambda: log_probs.detach().exp().repeat_interleave(K, dim=1)},
        )

    def token_logits(self, params, obs, actions):
        return self.context_logits(params, obs).unsqueeze(-2)  # [S, R, 1, K]

    def log_probs(self, params: Sequence[Tensor], features: Tensor) -> Tensor:
        """log π(·|x) ``[S, n, K]``."""
        return torch.log_softmax(self.logits(params, features), -1)

    def grad_sq_norms(self, params: Sequence[Tensor], features: Tensor, actions: Tensor) -> Tensor:
        """‖∇_θ log π(a|x)‖² per row ``[S, n]`` (for the min-variance baseline), where a policy has it."""
        raise ValueError(f"{type(self).__name__} does not provide per-sample gradient norms; "
                         "use min_variance with weights='rho2'")


__all__ = ["CategoricalPolicy"]
