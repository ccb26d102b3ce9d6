"""Sampler rounding: an inference engine's low-precision logits as a mismatch that follows the
weights (issue 42; docs/regime.md).

``logit_noise`` and ``measured_mismatch`` add noise of a fixed σ, so their sampler–learner KL can only
shrink as the policy sharpens; the real mismatch is a rounding error, **relative** to the values
rounded and **deterministic** for a given input (the same prompt and prefix give the same error in
an engine), so it grows as the logits grow (Precision-RL, arXiv 2510.26788: KL[μ‖π] ≈ 1e-3 at the
start of bf16 training, rising to ≈ 1–2 before GRPO's collapse; sail-sg/Precision-RL
``figures/verl_oat_fix.png``, read off the figure). This friction rounds the sampler's logits to a
mantissa of ``mantissa_bits`` bits:

    x̂ = round(x / q)·q,   q = 2^(⌊log₂|x|⌋ − b)

(round half to even). At b = 7 this is bf16's rounding, at b = 10 fp16's (tested bit for bit
against ``Tensor.to``); a real b calibrates the toy, whose logits are smaller than an LLM's, to the
published KL at its warm start (``docs/regime.md``: the calibration and its measured KL), after
which the error is left free to follow the logits. No random draw: the friction is a pure function
of the logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_range
from sandbox.frictions.base import Friction, register_friction

#: stored mantissa bits of the half-precision formats
MANTISSA_BITS = {"bfloat16": 7, "float16": 10}


def round_mantissa(x: Tensor, bits: float) -> Tensor:
    """``x`` rounded to ``bits`` mantissa bits (relative step 2^−bits; module docstring); zeros and
    non-finite values are kept. Computed in float64, returned in ``x``'s dtype."""
    check_range("bits", bits, low=0.0, high=52.0)
    x64 = x.to(torch.float64)
    finite = torch.isfinite(x64) & (x64 != 0)
    safe = torch.where(finite, x64, torch.ones_like(x64))
    q = torch.exp2(torch.floor(torch.log2(safe.abs())) - bits)
    return torch.where(finite, torch.round(safe / q) * q, x64).to(x.dtype)


@register_friction("sampler_rounding")
@dataclass(frozen=True)
class SamplerRounding(Friction):
    """The sampler's logits rounded to ``mantissa_bits`` (module docstring): 7 is bf16, 10 fp16;
    a real value is a calibration. 0 (the default) is off: no rounding."""

    strength = "mantissa_bits"
    mantissa_bits: float = 0.0  # b in (0, 52], or 0 (off)
    tail_rate: float = 0.0  # p: share of positions whose least likely token the sampler boosts, in [0, 1]
    tail_boost: float = 8.0  # Δ: that token's sampler logit is max + Δ (nats), in (0, 100]

    def __post_init__(self) -> None:
        check_range("mantissa_bits", self.mantissa_bits, low=0.0, high=52.0)
        check_range("tail_rate", self.tail_rate, low=0.0, high=1.0)
        check_range("tail_boost", self.tail_boost, low=0.0, low_open=True, high=100.0)

    @property
    def active(self) -> bool:
        return self.mantissa_bits != 0 or self.tail_rate > 0

    def actor_logits(self, logits, ctx, generator):
        out = round_mantissa(logits, self.mantissa_bits) if self.mantissa_bits else logits
        return heavy_tail(out, self.tail_rate, self.tail_boost) if self.tail_rate > 0 else out


def position_hash(logits: Tensor) -> Tensor:
    """A number in [0, 1) per position ``[..., V]`` → ``[...]``, a deterministic function of the
    position's logits (the same input, the same number; unrelated inputs, unrelated numbers)."""
    weights = torch.sin(torch.arange(1, logits.shape[-1] + 1, dtype=torch.float64, device=logits.device) * 12.9898)
    return torch.frac(torch.sin((logits.to(torch.float64) * weights).sum(-1)) * 43758.5453).abs()


def heavy_tail(logits: Tensor, rate: float, boost: float) -> Tensor:
    """At the positions whose ``position_hash`` is below ``rate``, the least likely token's logit set
    to max + ``boost`` (module docstring)."""
    hit = position_hash(logits) < rate
    tail = logits.argmin(-1, keepdim=True)
    raised = logits.amax(-1, keepdim=True) + boost
    boosted = logits.scatter(-1, tail, raised.to(logits.dtype))
    return torch.where(hit.unsqueeze(-1), boosted, logits)


__all__ = ["MANTISSA_BITS", "SamplerRounding", "heavy_tail", "position_hash", "round_mantissa"]
