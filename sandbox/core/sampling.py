"""The actor's sampling distribution, computed in one place for every policy family.

At every position the actor turns the policy's logits z into the distribution it draws from:

    z → z / τ → logits hook (frictions) → log-softmax → (1 − ε)·p + ε/V → probability hook (frictions)

and records the log-probability of the drawn token under exactly that distribution — unless a
friction makes the actor *report* another one (an engine that samples top-p but reports the full
softmax): ``report_hook`` maps the same (1 − ε)·p + ε/V to the reported distribution, and the
``reporting()`` twin of a chain returns the reported log-probs with the sampled probabilities. The
same ``distribution`` gives the log-probs of given tokens teacher-forced (the teacher-forced scorers
call it), so a policy's sampler and its teacher-forced twin cannot disagree, and ``draw`` is the one
inverse-CDF draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from sandbox.core.validation import check_range

Hook = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class SamplingChain:
    """Temperature τ, a logits hook, ε-mixing with the uniform distribution over the last axis and a
    probability hook; the identity chain is the policy itself (τ = 1, no hooks, ε = 0).

    ``report_hook`` (None: the actor reports what it samples) gives the reported distribution from
    the probabilities before ``probs_hook``; with ``reported=True`` (see ``reporting``) the
    log-probs ``distribution`` returns are the reported ones, its probabilities still the sampled ones."""

    temperature: float = 1.0
    logits_hook: Hook | None = None
    eps: float = 0.0
    probs_hook: Hook | None = None
    report_hook: Hook | None = None
    reported: bool = False

    def __post_init__(self) -> None:
        check_range("temperature", self.temperature, low=0.0, low_open=True)
        check_range("eps", self.eps, low=0.0, high=1.0)

    @property
    def transforms_probs(self) -> bool:
        return self.eps > 0 or self.probs_hook is not None or (self.reported and self.report_hook is not None)

    def distribution(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """``(log_probs, probs)`` over the last axis of ``logits [..., V]``."""
        if self.temperature != 1.0:
            logits = logits / self.temperature
        if self.logits_hook is not None:
            logits = self.logits_hook(logits)
        log_probs = torch.log_softmax(logits, -1)
        probs = log_probs.exp()
        if self.transforms_probs:
            if self.eps > 0:
                probs = (1 - self.eps) * probs + self.eps / logits.shape[-1]
            mixed = probs
            if self.probs_hook is not None:
                probs = self.probs_hook(mixed)
            log_probs = torch.log(probs)
            if self.reported and self.report_hook is not None:
                log_probs = torch.log(self.report_hook(mixed))
        return log_probs, probs

    @property
    def reports_sampled(self) -> bool:
        """True when the reported log-probs are those of the sampled distribution."""
        return self.report_hook is None

    def reporting(self) -> SamplingChain:
        """The twin whose ``distribution`` returns the *reported* log-probs (same probabilities, so
        the same draws from the same uniforms)."""
        return replace(self, reported=True)


IDENTITY = SamplingChain()


def draw(probs: Tensor, uniforms: Tensor) -> Tensor:
    """Inverse-CDF draw of one token per row of ``probs [..., V]`` from ``uniforms [..., 1]`` in [0, 1)
    (the CDF is normalised by its last entry, so rounding never leaves the support)."""
    cdf = torch.cumsum(probs, -1)
    token = torch.searchsorted(cdf, uniforms.to(cdf.dtype) * cdf[..., -1:], right=True)
    return token.clamp_(max=probs.shape[-1] - 1).squeeze(-1)


__all__ = ["IDENTITY", "Hook", "SamplingChain", "draw"]
