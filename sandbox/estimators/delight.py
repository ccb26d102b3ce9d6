"""The Delight family: the Delightful Policy Gradient and Kondo screening.

Delight χ = A·ℓ, ℓ = −log π_θ(a) the surprisal under the learner ("Delightful Policy Gradient",
arXiv 2603.14608; "Delightful Distributed Policy Gradient", arXiv 2603.20521). DG weighs the
REINFORCE term by a stop-gradient gate w = σ((χ − λ)/η): rare successes (large χ) pass, rare
failures (very negative χ) are suppressed. No importance ratios, no μ.

The sigmoid is the maximiser of χ·w + η·H(w) over w ∈ [0, 1] (H the binary entropy), with value
η·softplus(χ/η); as η → ∞ the gate tends to ½ and DG to REINFORCE/2; η = 0 is the hard gate 1[χ > λ].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_range
from sandbox.estimators.base import (
    Estimator,
    PGTerms,
    TokenLoss,
    masked_mean,
    register_estimator,
    sg,
)

GATE_INPUTS = ("delight", "additive")
PRIORITIES = ("delight", "advantage", "surprisal", "uniform")


def delight(advantages: Tensor, logp: Tensor) -> Tensor:
    """χ = A·ℓ with ℓ = −log π_θ(a) (detached)."""
    return advantages * (-sg(logp))


@register_estimator("dg")
@dataclass(frozen=True)
class Delight(Estimator):
    """Delightful PG: loss −sg(σ((χ − λ)/η))·A·log π_θ with χ = A·(−log π_θ); η = 0 is the hard gate."""

    @property
    def batch_dependent(self) -> bool:
        return self.whiten  # standardised over the batch's tokens

    eta: float = 1.0  # gate temperature η ≥ 0
    lam: float = 0.0  # gate threshold λ
    stochastic: bool = False  # sample w ~ Bernoulli(σ(·)) instead of using σ(·)
    gate_input: str = "delight"  # 'delight' (χ = A·ℓ) | 'additive' ((1−α)·A + α·ℓ)
    alpha: float = 0.5  # mixing weight α in [0, 1] of the additive gate input
    whiten: bool = False  # standardise the gate input over the valid tokens of the batch
    surprisal_clip: float | None = None  # clip ℓ at this value (> 0) inside the gate

    def check(self) -> None:
        check_range("eta", self.eta, low=0.0)
        check_range("lam", self.lam)
        check_choice("gate_input", self.gate_input, GATE_INPUTS)
        check_range("alpha", self.alpha, low=0.0, high=1.0)
        check_range("surprisal_clip", self.surprisal_clip, low=0.0, low_open=True, allow_none=True, finite=False)

    def gate_input_values(self, terms: PGTerms) -> Tensor:
        adv = terms.token_advantages
        surprisal = -sg(terms.logp)
        if self.surprisal_clip is not None:
            surprisal = torch.clamp(surprisal, max=self.surprisal_clip)
        if self.gate_input == "delight":
            chi = adv * surprisal
        else:
            chi = (1.0 - self.alpha) * adv + self.alpha * surprisal
        if self.whiten:
            mask = terms.valid
            mean = masked_mean(chi, mask)[..., None, None]
            var = masked_mean((chi - mean).pow(2), mask)[..., None, None]
            chi = (chi - mean) / torch.sqrt(var + 1e-8)
        return sg(chi)

    def gate(self, terms: PGTerms) -> Tensor:
        """w per token (detached): σ((χ − λ)/η), 1[χ > λ] at η = 0, or a Bernoulli draw of it."""
        chi = self.gate_input_values(terms)
        if self.eta == 0:
            prob = (chi > self.lam).to(chi.dtype)
        else:
            prob = torch.sigmoid((chi - self.lam) / self.eta)
        if self.stochastic:
            gen = terms.require_generator(f"{self.name} with stochastic=True")
            prob = torch.bernoulli(prob, generator=gen)
        return prob

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        w = self.gate(terms)
        return TokenLoss(
            -w * terms.token_advantages * terms.logp,
            metrics={"gate_mean": masked_mean(w, terms.valid)},
        )


@register_estimator("kondo")
@dataclass(frozen=True)
class Kondo(Estimator):
    """Kondo screening: keep the top ``pct`` of valid tokens by priority (ties included);
    loss −Σ_kept A·log π_θ / (number of valid tokens). Only kept rows need a backward pass."""

    screens_rows = True

    @property
    def batch_dependent(self) -> bool:
        return True  # the kept fraction is a quantile over the batch

    pct: float = 0.1  # kept fraction in (0, 1]
    priority: str = "delight"  # 'delight' (χ = A·ℓ) | 'advantage' (|A|) | 'surprisal' (ℓ) | 'uniform'

    def check(self) -> None:
        check_range("pct", self.pct, low=0.0, high=1.0, low_open=True)
        check_choice("priority", self.priority, PRIORITIES)

    def priorities(self, terms: PGTerms) -> Tensor:
        adv = terms.token_advantages
        if self.priority == "delight":
            return sg(delight(adv, terms.logp))
        if self.priority == "advantage":
            return sg(adv.abs())
        if self.priority == "surprisal":
            return -sg(terms.logp)
        gen = terms.require_generator(f"{self.name} with priority='uniform'")
        return torch.rand(terms.logp.shape, generator=gen, dtype=terms.logp.dtype)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B, T] bool: valid tokens whose priority is at least the k-th largest,
        k = ceil(pct · n_valid) per population member (ties at the threshold are all kept)."""
        mask = terms.valid
        prio = torch.where(mask, self.priorities(terms), terms.logp.new_full((), -math.inf))
        flat = prio.flatten(-2)
        n_valid = mask.flatten(-2).sum(-1)
        k = torch.ceil(self.pct * n_valid.to(torch.float64) - 1e-9).clamp(min=1).long()
        ordered = torch.sort(flat, dim=-1, descending=True).values
        threshold = ordered.gather(-1, (k - 1).unsqueeze(-1)).unsqueeze(-1)
        return (prio >= threshold) & mask

    def token_loss(self, terms: PGTerms, keep: Tensor | None = None) -> TokenLoss:
        """−A·log π_θ on the kept tokens; ``keep`` (default ``keep_mask(terms)``) lets a screened
        trainer pass the mask it chose the backward rows with."""
        keep = self.keep_mask(terms) if keep is None else keep
        rows = terms.valid.any(-1)
        loss = -terms.token_advantages * terms.logp * keep.to(terms.logp.dtype)
        return TokenLoss(
            loss,
            metrics={
                "kept_frac": masked_mean(keep.to(loss.dtype), terms.valid),
                "kept_rows_frac": masked_mean(keep.any(-1).to(loss.dtype), rows, dims=(-1,)),
            },
        )
