"""Measured mismatch: an inference engine's sampler–learner mismatch at the size published for LLM
RL, as a friction of any task (issue 32).

``precision_mismatch`` casts the sampler to bf16 on the toy model, whose tiny width and logits give
a mismatch of another size than an LLM's. This friction instead sets the mismatch from published
measurements. Model: the sampler's logits are the learner's plus fresh noise, z̃ = z + σ·ε with
ε ~ N(0, I) drawn per row, position and vocabulary entry (rounding error of low-precision logits,
independent across tokens). The actor samples from, and reports, softmax(z̃): the reported and the
true behaviour log-probs are the same by construction (the one sampling chain applies the hook).

For small σ, per token (Schulman's k1 = E_μ[log μ − log π]):

    KL(μ‖π) = ½σ²·Var_π(ε) + O(σ³),  E Var_π(ε) = 1 − Σ_a π(a)²,
    log π(a) − log μ(a) ≈ −σ·(ε_a − Σ_b π(b) ε_b): mean −KL, spread ≈ σ·(1 − π(a)) for a likely token,

so the mismatch concentrates on uncertain positions and on unlikely tokens (the 1 − p scaling of
Li et al., arXiv 2512.23087), and over an answer of T tokens the sequence log-ratio drifts by −T·KL
with spread ≈ σ√T. The strength ``token_kl`` = κ is the published token KL[μ‖π] at the start of
training; σ = √(2κ·V/(V − 1)) gives KL = κ for a uniform policy over V tokens (a freshly
initialised model's), and less for a sharper one. Published levels (``PUBLISHED``):

* bf16 sampler and trainer: κ ≈ 1e-3, fp16: κ ≈ 1e-5 — Precision-RL (sail-sg/Precision-RL,
  figures/verl_oat_fix.png, OAT row, panel KL[μ|π], at the first steps; read off the figure);
* sequence log-ratio against answer length in bf16: slope −1.01 nats per 1,000 tokens (fp16:
  −0.07) — the same repository, figures/offline_mismatch.png (numbers printed in the figure);
  −1.01 nats per 1,000 tokens is −1.01e-3 per token, the bf16 κ above.

``docs/predictions.md`` (Calibration) tabulates the friction's measured statistics beside these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sandbox.core.validation import check_range
from sandbox.frictions.base import Friction, register_friction

#: published token KL[μ‖π] at the start of training, per sampler/trainer precision (module docstring)
PUBLISHED = {"bf16": 1e-3, "fp16": 1e-5}


def mismatch_sigma(token_kl: float, vocab: int) -> float:
    """σ of the logit noise whose expected KL(μ‖π) is ``token_kl`` for a uniform policy over
    ``vocab`` tokens, to second order: ½σ²(1 − 1/V) = κ."""
    check_range("token_kl", token_kl, low=0.0, high=1.0)
    if vocab < 2:
        raise ValueError(f"vocab must be ≥ 2, got {vocab}")
    return math.sqrt(2.0 * token_kl * vocab / (vocab - 1))


@register_friction("measured_mismatch")
@dataclass(frozen=True)
class MeasuredMismatch(Friction):
    """The sampler adds fresh N(0, σ²) noise to every logit, σ = √(2κ·V/(V − 1)), κ = ``token_kl``
    the published token KL[μ‖π] (module docstring; bf16 ≈ 1e-3, fp16 ≈ 1e-5). 0 is the identity."""

    token_kl: float = 0.0  # strength κ: token KL[μ‖π] of a uniform policy, in [0, 1]

    def __post_init__(self) -> None:
        check_range("token_kl", self.token_kl, low=0.0, high=1.0)

    @property
    def active(self) -> bool:
        return self.token_kl > 0

    def actor_logits(self, logits, ctx, generator):
        sigma = mismatch_sigma(self.token_kl, logits.shape[-1])
        noise = torch.randn(logits.shape, generator=generator, dtype=logits.dtype)
        return logits + sigma * noise.to(logits.device)  # drawn on the CPU generator: the same draws everywhere


__all__ = ["PUBLISHED", "MeasuredMismatch", "mismatch_sigma"]
