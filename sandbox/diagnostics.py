"""Diagnostics of updates: cosines to oracle gradients, consecutive-update cosines, perpendicular
second moments per sample, and the effective sample size.

All take flattened directions ``[*P, D]`` (population members never mix).
"""

from __future__ import annotations

from torch import Tensor

from sandbox.estimators.base import effective_sample_size_fraction

__all__ = ["cosine", "effective_sample_size_fraction", "misalignment", "perpendicular", "perpendicular_second_moment"]


def cosine(a: Tensor, b: Tensor, eps: float = 1e-12) -> Tensor:
    """cos(a, b) along the last axis; 0 where either vector is zero."""
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp(min=eps)


def misalignment(update: Tensor, oracle: Tensor) -> Tensor:
    """1 − cos(update, oracle): 0 when the update points along the oracle gradient."""
    return 1 - cosine(update, oracle)


def perpendicular(g: Tensor, direction: Tensor) -> Tensor:
    """The part of ``g`` perpendicular to ``direction`` (last axis): g − (g·u)u, u = direction/‖direction‖."""
    u = direction / direction.norm(dim=-1, keepdim=True)
    return g - (g * u).sum(-1, keepdim=True) * u


def perpendicular_second_moment(per_sample: Tensor, direction: Tensor, weights: Tensor | None = None) -> Tensor:
    """E‖g_⊥‖² over samples: ``per_sample [*P, n, D]`` single-sample updates, ``direction [*P, D]`` the
    reference (e.g. the true gradient), ``weights [*P, n]`` the sampling probabilities (default uniform)."""
    sq = perpendicular(per_sample, direction.unsqueeze(-2)).pow(2).sum(-1)
    if weights is None:
        return sq.mean(-1)
    return (weights * sq).sum(-1) / weights.sum(-1)
