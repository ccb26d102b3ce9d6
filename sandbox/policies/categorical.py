"""The categorical-policy contract: logits over K actions of a context's features, for a population
of S independent members (parameters ``[S, ...]``, a list of tensors that live outside the policy).

Implemented by the tabular softmax (``sandbox.policies.tabular``, features = context ids) and the
MLP (``sandbox.policies.mlp``, features = pixels); composed with a contextual environment
(``sandbox.envs.contextual``) by ``sandbox.tasks.categorical.CategoricalTask``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor


class CategoricalPolicy(ABC):
    """init → params ``[S, ...]``; ``logits(params, features)`` → ``[S, n, K]``."""

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

    def log_probs(self, params: Sequence[Tensor], features: Tensor) -> Tensor:
        """log π(·|x) ``[S, n, K]``."""
        return torch.log_softmax(self.logits(params, features), -1)

    def grad_sq_norms(self, params: Sequence[Tensor], features: Tensor, actions: Tensor) -> Tensor:
        """‖∇_θ log π(a|x)‖² per row ``[S, n]`` (for the min-variance baseline), where a policy has it."""
        raise ValueError(f"{type(self).__name__} does not provide per-sample gradient norms; "
                         "use min_variance with weights='rho2'")


__all__ = ["CategoricalPolicy"]
