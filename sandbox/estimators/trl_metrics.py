"""TRL's off-policy metrics, computed as TRL 1.16.0 computes them — run against TRL 1.16.0's own code in
tests/conformance/test_trl_metrics.py (every mode and bound, equal to 1e-12); TRL documents no
alarm threshold on any of them.

**GRPOTrainer** (``trl/trainer/grpo_trainer.py``, ``_generate_and_score_completions``) logs its
vLLM-correction metrics only with ``use_vllm`` and ``vllm_importance_sampling_correction``:

With Δ = log π_old − log μ per valid token (π_old: the trainer's log-probs, recomputed once per
generation batch before its updates; μ: the log-probs vLLM returned with the sample):

- ``sampling/sampling_logp_difference/mean`` = mean of |Δ| over valid tokens; ``…/max`` = max |Δ|;
- the IS ratio ρ at the mode's level: per token exp(Δ), or per sequence exp(Σ_t Δ) (one value per
  answer; no bound before ``exp``), then ``*_truncate``: clamp(ρ, C_min, C_max), ``*_mask``:
  ρ·1[C_min ≤ ρ ≤ C_max] (a bound that is None is open; a truncate mode needs one, as GRPOConfig
  requires) — the weight the loss multiplies;
- ``sampling/importance_sampling_ratio/min``, ``…/mean``, ``…/max`` of ρ over the valid tokens
  (token modes) or over all the batch's answers (sequence modes; an answer without a valid token has
  ρ = 1 before its bound), masked-out ratios (0) included.

A token vLLM could not score (μ NaN) is left out of the Δ statistics and gets Δ = 0 in ρ; an
infinite Δ is replaced by ±the largest float before the sum (``torch.nan_to_num``), as TRL does.

One process: TRL gathers the mean of the processes' means and the min/max over processes; with
one process these are the batch's own. No valid token: 0 for the Δ statistics and the token modes'
(TRL's value for an empty selection).

**AsyncGRPOTrainer** (``trl/experimental/async_grpo/async_grpo_trainer.py``, ``compute_loss``) logs
in every loss call, with r = π_θ/π_old per valid token and π_old the log-probs vLLM returned
(never recomputed): ``ratio`` = mean of r (untruncated), ``kl`` = mean of (r − 1) − log r (the k3
estimate); a batch without tokens gives 0/0, NaN, as TRL's sums over its count.

Tensors are ``[*P, B, T]``; each metric is ``[*P]`` (population members never mix).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["ASYNC_METRICS", "METRICS", "MODES", "TRAINERS", "check_bounds", "trl_async_metrics", "trl_sampling_metrics"]

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
DIFF = "sampling/sampling_logp_difference"
RATIO = "sampling/importance_sampling_ratio"
#: the names TRL 1.16.0 logs them under
METRICS = (f"{DIFF}/mean", f"{DIFF}/max", f"{RATIO}/min", f"{RATIO}/mean", f"{RATIO}/max")
#: the names AsyncGRPOTrainer logs them under
ASYNC_METRICS = ("ratio", "kl")
#: ``Estimator.trl_metrics``: the trainer whose metrics a run logs, and them
TRAINERS = {"grpo": METRICS, "async_grpo": ASYNC_METRICS}


def trl_async_metrics(logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """AsyncGRPOTrainer's ``ratio`` and ``kl`` of one batch (module docstring): π_θ's ``logp``, vLLM's
    ``old_logp`` and the valid-token ``mask`` ``[*P, B, T]``."""
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.ndim < 2:
        raise ValueError(f"logp, old_logp and mask must share one shape [*P, B, T], got {tuple(logp.shape)}, "
                         f"{tuple(old_logp.shape)}, {tuple(mask.shape)}")
    mask = mask.bool()
    log_r = torch.where(mask, logp - old_logp, logp.new_zeros(()))
    r = torch.exp(log_r)
    n = mask.sum((-2, -1)).to(logp.dtype)
    ratio = torch.where(mask, r, logp.new_zeros(())).sum((-2, -1)) / n
    kl = torch.where(mask, (r - 1) - log_r, logp.new_zeros(())).sum((-2, -1)) / n
    return {"ratio": ratio, "kl": kl}


def _stats(x: Tensor, mask: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """(min, mean, max) of ``x`` where ``mask``, over ``dims``; 0 where nothing is valid."""
    n = mask.sum(dims)
    zero = x.new_zeros(())
    low = torch.where(mask, x, x.new_full((), math.inf)).amin(dims)
    high = torch.where(mask, x, x.new_full((), -math.inf)).amax(dims)
    mean = torch.where(mask, x, zero).sum(dims) / n.clamp(min=1)
    empty = n == 0
    return (torch.where(empty, zero, low), torch.where(empty, zero, mean), torch.where(empty, zero, high))


def check_bounds(mode: str, clip_max: float | None, clip_min: float | None) -> None:
    """What ``GRPOConfig.__post_init__`` accepts: ``clip_max`` > 0 or None, ``clip_min`` ≥ 0 and below
    ``clip_max`` or None, and at least one of them in a ``*_truncate`` mode (TRL refuses neither)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if clip_max is not None and not clip_max > 0:
        raise ValueError(f"clip_max must be > 0 or None, got {clip_max!r}")
    if clip_min is not None and not (clip_min >= 0 and (clip_max is None or clip_min < clip_max)):
        raise ValueError(f"clip_min must be in [0, clip_max={clip_max}) or None, got {clip_min!r}")
    if mode.endswith("truncate") and clip_min is None and clip_max is None:
        raise ValueError(f"mode {mode!r} needs clip_max or clip_min: TRL refuses a truncate mode without a bound")


def trl_sampling_metrics(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, mode: str,
                         clip_max: float | None = 3.0, clip_min: float | None = None) -> dict[str, Tensor]:
    """TRL's five ``sampling/*`` metrics of one batch (module docstring): the trainer's ``old_logp``,
    vLLM's ``sampling_logp`` and the valid-token ``mask`` ``[*P, B, T]``; ``mode`` one of ``MODES``
    (``vllm_importance_sampling_mode``), ``clip_max`` > 0 or None and ``clip_min`` ≥ 0 or None
    (``vllm_importance_sampling_clip_max``/``_min``)."""
    if old_logp.shape != sampling_logp.shape or old_logp.shape != mask.shape or old_logp.ndim < 2:
        raise ValueError(f"old_logp, sampling_logp and mask must share one shape [*P, B, T], got "
                         f"{tuple(old_logp.shape)}, {tuple(sampling_logp.shape)}, {tuple(mask.shape)}")
    check_bounds(mode, clip_max, clip_min)
    mask = mask.bool()
    raw = old_logp - sampling_logp
    tokens = (-2, -1)
    _, diff_mean, diff_max = _stats(raw.abs(), mask & ~raw.isnan(), tokens)  # a NaN Δ: left out
    diff = torch.where(mask, torch.nan_to_num(raw, nan=0.0), old_logp.new_zeros(()))  # … and weighted 1
    if mode.startswith("sequence"):
        ratio, valid, dims = torch.exp(diff.sum(-1)), torch.ones_like(mask[..., 0]), (-1,)
    else:
        ratio, valid, dims = torch.exp(diff), mask, tokens
    if mode.endswith("truncate"):
        ratio = ratio.clamp(min=clip_min, max=clip_max)
    else:
        low = -math.inf if clip_min is None else clip_min
        high = math.inf if clip_max is None else clip_max
        ratio = torch.where((ratio < low) | (ratio > high), ratio.new_zeros(()), ratio)
    r_min, r_mean, r_max = _stats(ratio, valid, dims)
    return dict(zip(METRICS, (diff_mean, diff_max, r_min, r_mean, r_max)))
