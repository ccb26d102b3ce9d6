"""Diagnostics of updates: cosines to oracle gradients, consecutive-update cosines, perpendicular
second moments per sample, the effective sample size, the policy's entropy — and ``SIGNALS``, the
early-warning signals every run logs at every logged step, each computed in one place.

The cosines and moments take flattened directions ``[*P, D]`` (population members never mix).
"""

from __future__ import annotations

import torch
from torch import Tensor

from sandbox.estimators.base import effective_sample_size_fraction, masked_mean

__all__ = ["SIGNALS", "cosine", "effective_sample_size_fraction", "misalignment", "perpendicular",
           "perpendicular_second_moment", "token_entropy"]

#: the signals every run logs at every logged step (the metrics of the update before it), by column
#: name, with where each is computed (once). An estimator that neither clips nor masks logs no
#: clip_frac / mask_frac: it has nothing to report there.
SIGNALS = {
    "ess_frac": "ESS/B of the sequence ratios π_θ/μ (sandbox.estimators.base.behavior_diagnostics)",
    "kl_k1": "k1 estimate of KL(μ‖π_θ), E_μ[log μ − log π_θ] per token (behavior_diagnostics)",
    "kl_k3": "k3 estimate of KL(μ‖π_θ), E_μ[r − 1 − log r] per token (behavior_diagnostics)",
    "log_ratio_abs_mean": "mean |log π_θ − log μ| over valid tokens (behavior_diagnostics)",
    "log_ratio_abs_max": "largest |log π_θ − log μ| over valid tokens (behavior_diagnostics)",
    "grad_norm": "‖g‖ of the estimator's raw gradient (sandbox.runtime.loop.ActorLearner.update)",
    "cos_consecutive": "cos(g_t, g_{t−1}) of consecutive raw gradients (ActorLearner.update, ``cosine``)",
    "entropy": "mean token entropy of π_θ on the rollout's contexts (``token_entropy`` of Task.token_logits)",
    "clip_frac": "fraction of valid tokens clipped or truncated (the estimator's own metric)",
    "mask_frac": "fraction of valid tokens masked (the estimator's own metric)",
    "rollout_is_clip_frac": "tokens whose rollout correction is truncated (Estimator.rollout_is_fraction)",
    "rollout_is_mask_frac": "tokens whose rollout correction is zeroed (Estimator.rollout_is_fraction)",
}


def token_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean entropy H(π(·|context)) = −Σ_a π(a) log π(a) of the next-token distributions
    ``logits [*P, B, T, V]`` over the valid tokens ``mask [*P, B, T]`` → ``[*P]`` (in float64)."""
    log_p = torch.log_softmax(logits.to(torch.float64), -1)
    per_token = -(log_p.exp() * log_p).nan_to_num(0.0).sum(-1)  # 0·log 0 = 0
    return masked_mean(per_token, mask)


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
