"""verl's rollout-correction metrics, computed as verl 0.9.1 computes them (read, not copied:
``verl/trainer/ppo/rollout_corr_helper.py``, ``compute_is_metrics`` and ``compute_offpolicy_metrics``).

With log r = log π − log μ per valid token (π: the recomputed π_old in decoupled mode, the
current π_θ in bypass mode; μ: the engine's log-probs), bounded to ±20 before ``exp``:

- the IS weight w at the configured level: per token exp(log r), or per sequence exp(Σ_t log r)
  broadcast over its tokens; then verl's truncation, TIS w ← min(w, upper) for a single threshold
  or IcePop w ← w·1[lower ≤ w ≤ upper] for 'lower_upper';
- ``rollout_is_mean`` = mean of w over valid tokens;
- ``rollout_is_std`` = sqrt(max(0, mean(w̃²) − mean(w̃)²)), w̃ = clamp(w, 0, upper) (0 for one token);
- ``rollout_is_eff_sample_size`` = 1 / mean((w̃ / (mean(w̃) + 1e-8))²) over valid tokens;
- ``kl`` = mean of log μ − log π over valid tokens (k1 of KL(μ‖π), signed);
- ``chi2_token`` = mean of exp(log r)² over valid tokens − 1;
- ``chi2_seq`` = mean over the batch's rows of exp(2·Σ_t log r) − 1 (bounded sum).

Means over tokens divide by the count + 1e-8, as verl's ``masked_mean``. The IS metrics exist only
when ``rollout_is`` is set (``level`` not None); ``kl`` and the χ² metrics always. Tensors are
``[*P, B, T]``; each metric is ``[*P]`` (population members never mix).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["BOUND", "LEVELS", "METRICS", "check_verl_metrics", "rollout_corr_metrics"]

#: verl's SAFETY_BOUND on log-weights before exp
BOUND = 20.0
LEVELS = ("token", "sequence")
#: the metrics, by verl's name (logged as ``rollout_corr/<name>``); the IS ones need a level
METRICS = ("rollout_is_mean", "rollout_is_std", "rollout_is_eff_sample_size", "kl", "chi2_token", "chi2_seq")


def check_verl_metrics(value) -> tuple:
    """``Estimator.verl_metrics``: () or (level, upper, lower) as ``rollout_corr_metrics`` takes them
    (a JSON list is read as the tuple); one ``ValueError`` line naming the field otherwise."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return ()
    if not (isinstance(value, (tuple, list)) and len(value) == 3):
        raise ValueError(f"verl_metrics must be () or (level, upper, lower), got {value!r}")
    level, upper, lower = value
    ok = (level is None or level in LEVELS) and isinstance(upper, (int, float)) and not isinstance(upper, bool) \
        and upper > 0 and (lower is None or (isinstance(lower, (int, float)) and 0 < lower <= upper))
    if not ok:
        raise ValueError(f"verl_metrics must be (level in {list(LEVELS)} or None, upper > 0, lower in (0, upper] "
                         f"or None), got {value!r}")
    return (level, float(upper), None if lower is None else float(lower))


def _mean(x: Tensor, mask: Tensor) -> Tensor:
    """verl's ``masked_mean`` over the last two dims: Σ m·x / (Σ m + 1e-8)."""
    m = mask.to(x.dtype)
    return torch.where(mask, x, x.new_zeros(())).sum((-2, -1)) / (m.sum((-2, -1)) + 1e-8)


def rollout_corr_metrics(logp: Tensor, rollout_logp: Tensor, mask: Tensor, level: str | None = None,
                         upper: float = 2.0, lower: float | None = None) -> dict[str, Tensor]:
    """verl's ``rollout_corr/*`` metrics of one batch (module docstring): π's log-probs ``logp``, μ's
    ``rollout_logp``, the valid-token ``mask`` ``[*P, B, T]``; ``level`` 'token', 'sequence' or None
    (no IS weights: kl and χ² only); ``upper`` > 0 and ``lower`` (IcePop, in (0, upper]) or None (TIS)."""
    if logp.shape != rollout_logp.shape or logp.shape != mask.shape or logp.ndim < 2:
        raise ValueError(f"logp, rollout_logp and mask must share one shape [*P, B, T], got {tuple(logp.shape)}, "
                         f"{tuple(rollout_logp.shape)}, {tuple(mask.shape)}")
    if level is not None and level not in LEVELS:
        raise ValueError(f"level must be one of {list(LEVELS)} or None, got {level!r}")
    if not upper > 0:
        raise ValueError(f"upper must be > 0, got {upper!r}")
    if lower is not None and not 0 < lower <= upper:
        raise ValueError(f"lower must be in (0, upper={upper}] or None, got {lower!r}")
    mask = mask.bool()
    zero = logp.new_zeros(())
    log_r = torch.where(mask, logp - rollout_logp, zero)
    seq_sum = log_r.sum(-1)
    out = {"kl": _mean(-log_r, mask),
           "chi2_token": _mean(torch.exp(log_r.clamp(-BOUND, BOUND)).square(), mask) - 1.0,
           "chi2_seq": torch.exp(2.0 * seq_sum.clamp(-BOUND, BOUND)).mean(-1) - 1.0}
    if level is None:
        return out
    if level == "token":
        raw = torch.exp(log_r.clamp(-BOUND, BOUND))
    else:
        raw = torch.exp(seq_sum.clamp(-BOUND, BOUND)).unsqueeze(-1).expand_as(log_r)
    raw = torch.where(mask, raw, zero)
    w = raw.clamp(max=upper) if lower is None else torch.where((raw >= lower) & (raw <= upper), raw, zero)
    clamped = w.clamp(min=0.0, max=upper)
    mean_c = _mean(clamped, mask)
    many = mask.sum((-2, -1)) > 1
    std = torch.sqrt((_mean(clamped.square(), mask) - mean_c.square()).clamp(min=0.0))
    out["rollout_is_mean"] = _mean(w, mask)
    out["rollout_is_std"] = torch.where(many, std, zero)
    out["rollout_is_eff_sample_size"] = 1.0 / _mean((clamped / (mean_c.unsqueeze(-1).unsqueeze(-1) + 1e-8)).square(),
                                                    mask)
    return out
