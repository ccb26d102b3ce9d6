"""Precision mismatch (LLM mode): the sampler runs in bf16 (or fp16), the learner in fp32
(shared/spec/environments.md, "Actor bugs" (e)).

Inference engines sample from a low-precision copy of the policy while the trainer scores the same
tokens in fp32, so μ ≠ π even at zero staleness. The friction casts the actor's parameters to
``sampler_dtype``; a task whose forward follows its parameters' dtype (the transformers adapter
``hf_text`` runs its actor module in that dtype) then samples in low precision, and the friction
upcasts the sampler's logits to fp32 before the softmax (as inference engines do), so the recorded
behaviour log-probs are fp32 log-probs of bf16 logits. The size of the mismatch is measured by the
k3 estimator of KL(μ‖π) on the sampled tokens (``k3_kl``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from sandbox.core.validation import check_choice, check_shape, check_tensor
from sandbox.frictions.base import Friction, register_friction

SAMPLER_DTYPES = ("off", "float32", "bfloat16", "float16")
_HALF = (torch.bfloat16, torch.float16)


def k3_kl(behavior_logp: Float[Tensor, "*P B T"], target_logp: Float[Tensor, "*P B T"],
          mask: Bool[Tensor, "*P B T"]) -> Float[Tensor, "*P"]:
    """k3 estimate of KL(μ‖π) from tokens sampled from μ, averaged over valid tokens:
    mean_t [(r − 1) − log r], r = π(a_t)/μ(a_t) (Schulman 2020, "Approximating KL Divergence").
    Non-negative per token, unbiased, and 0 exactly when π = μ on the sampled tokens."""
    check_tensor("behavior_logp", behavior_logp, dtype="float")
    check_tensor("target_logp", target_logp, dtype="float")
    check_shape("target_logp", target_logp, behavior_logp.shape, "behavior_logp")
    check_tensor("mask", mask, dtype="bool")
    check_shape("mask", mask, behavior_logp.shape, "behavior_logp")
    log_r = (target_logp.double() - behavior_logp.double()).masked_fill(~mask, 0.0)
    per_token = torch.expm1(log_r) - log_r
    return (per_token.sum((-2, -1)) / mask.sum((-2, -1)).clamp(min=1)).to(behavior_logp.dtype)


@register_friction("precision_mismatch")
@dataclass(frozen=True)
class PrecisionMismatch(Friction):
    """The actor samples with its parameters cast to ``sampler_dtype`` (activations follow in the
    transformers adapter); its logits are upcast to fp32 before the softmax. 'off' is the identity;
    'float32' is the identity for an fp32 learner (a mismatch for an fp64 one)."""

    sampler_dtype: str = "bfloat16"  # 'off' | 'float32' | 'bfloat16' | 'float16'

    def __post_init__(self) -> None:
        check_choice("sampler_dtype", self.sampler_dtype, SAMPLER_DTYPES)

    @property
    def active(self) -> bool:
        return self.sampler_dtype != "off"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.sampler_dtype)

    def actor_params(self, params, ctx):
        return [p.to(self.torch_dtype) if p.is_floating_point() else p for p in params]

    def actor_logits(self, logits, ctx, generator):
        return logits.float() if logits.dtype in _HALF else logits


__all__ = ["SAMPLER_DTYPES", "PrecisionMismatch", "k3_kl"]
