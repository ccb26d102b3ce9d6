"""Truncated sampling: the inference engine samples top-k / top-p (nucleus) and reports a log-prob.

An engine that returns the log-prob of the *processed* distribution (vLLM
``logprobs_mode='processed_logprobs'``) reports the renormalised truncated one, which is what was
really sampled (reported μ = true μ, but μ is no longer the policy's softmax). An engine that
returns the model's own log-prob (vLLM ``logprobs_mode='raw_logprobs'``) reports the full softmax
while sampling the truncated one: the reported μ is then off by the surviving mass Z,
log μ_true(a) = log μ_reported(a) − log Z for every kept token, and an IS ratio built on it is
biased by Z.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_range
from sandbox.frictions.base import Friction, register_friction

REPORTS = ("truncated", "full")


def truncate(probs: Tensor, top_p: float = 1.0, top_k: int = 0) -> Tensor:
    """Keep the ``top_k`` most likely tokens (0: all) and, of those, the smallest set of most likely
    tokens whose mass reaches ``top_p`` (the token that crosses p is kept), then renormalise over the
    last axis: p'(a) = p(a)·1[a kept]/Z, Z = Σ_kept p. Ties are broken by token index."""
    check_range("top_p", top_p, low=0.0, high=1.0, low_open=True)
    check_range("top_k", top_k, low=0)
    if top_p >= 1.0 and (top_k == 0 or top_k >= probs.shape[-1]):
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    before = torch.cumsum(sorted_probs, -1) - sorted_probs  # mass of the strictly more likely tokens
    keep_sorted = before < top_p * sorted_probs.sum(-1, keepdim=True)
    keep_sorted[..., 0] = True
    if top_k:
        keep_sorted[..., top_k:] = False
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(-1, keepdim=True)


@register_friction("truncated_sampling")
@dataclass(frozen=True)
class TruncatedSampling(Friction):
    """The actor samples top-k / top-p; ``report='truncated'`` (an engine's processed log-probs) records the
    renormalised log-prob (reported = true μ, the truncated distribution), ``report='full'`` the
    full distribution's (true μ stays the truncated one). top_p = 1 and top_k = 0 is the identity."""

    top_p: float = 1.0  # strength (as 1 − top_p): nucleus mass in (0, 1], 1 = off
    top_k: int = 0  # keep the k most likely tokens, ≥ 0; 0 = off
    report: str = "truncated"  # 'truncated' | 'full'

    def __post_init__(self) -> None:
        check_range("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        check_range("top_k", self.top_k, low=0)
        check_choice("report", self.report, REPORTS)

    @property
    def active(self) -> bool:
        return self.top_p < 1.0 or self.top_k > 0

    def actor_probs(self, probs, ctx):
        return truncate(probs, self.top_p, self.top_k)

    @property
    def reports_sampled(self) -> bool:
        return self.report != "full"

    def actor_reported_probs(self, probs, ctx):
        return probs if self.report == "full" else self.actor_probs(probs, ctx)


__all__ = ["REPORTS", "TruncatedSampling", "truncate"]
