"""Tabular softmax policy: one logit vector per context, ``table [S, N, K]``."""

from __future__ import annotations

import torch
from torch import Tensor


def tabular_logits(table: Tensor, contexts: Tensor) -> Tensor:
    """Logits ``[S, n, K]`` of context ids ``[S, n]`` (the rows of each member's table)."""
    S, _, K = table.shape
    return table.gather(1, contexts.unsqueeze(-1).expand(S, contexts.shape[-1], K))


def init_table(population: int, n_contexts: int, n_actions: int, std: float, generator: torch.Generator,
               dtype: torch.dtype = torch.float32) -> Tensor:
    """Zeros (std = 0) or i.i.d. N(0, std²) logits."""
    if std == 0:
        return torch.zeros(population, n_contexts, n_actions, dtype=dtype)
    return std * torch.randn(population, n_contexts, n_actions, generator=generator, dtype=dtype)
