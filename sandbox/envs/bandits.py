"""Bandits with exact quantities, vectorised over seeds (shared/spec/environments.md, "Bandits").

Single-context K-armed (N = 1) and multi-context (N contexts × K arms) bandits with one correct
arm per context, R = 1[a = y_n], tabular softmax policy z ∈ R^{S×N×K}; and the Gaussian
"gambling" bandit (arm 0 pays 1, arm 1 pays N(μ, σ²)), a negative control for surprisal gating.

Exact quantities, in logit space, no sampling: J(z) = mean_n p_n with p_n = π_n(y_n);
∇J ∝ ⊕_n p_n·(e_{y_n} − π_n); the CE oracle ⊕_n (e_{y_n} − π_n); and the exact expected update of
any per-token estimator, E_{a∼μ}[g(a)] = Σ_a μ(a)·g(a), by enumerating actions.
"""

from __future__ import annotations

import torch
from torch import Tensor

# ----------------------------------------------------------------------------- closed forms


def log_softmax(logits: Tensor) -> Tensor:
    """log π over the last axis; z − max − log Σ exp(z − max), several times faster than
    ``torch.log_softmax`` on CPU for the short last axes of bandits (same values to rounding)."""
    shifted = logits - logits.detach().amax(-1, keepdim=True)
    return shifted - shifted.exp().sum(-1, keepdim=True).log()


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


__all__ = ["ce_oracle", "exact_pg", "expected_return", "log_softmax"]
