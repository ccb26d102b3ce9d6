"""Sequence-level ratios: GMPO, GSPO-token, LUSPO and VESPO.

Product sequence ratio ρ_i = exp Σ_t m·(log π_θ − log μ); geometric s_i = exp(mean_t m·(log π_θ −
log π_prox)). Each reduces to REINFORCE (with its aggregation) at π_θ = π_prox = μ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.validation import check_range
from sandbox.estimators.base import (
    Estimator,
    PGTerms,
    TokenLoss,
    masked_mean,
    register_estimator,
    sequence_log_ratio,
    sg,
)
from sandbox.estimators.trust_region import GSPO, _check_ppo_fields, clipped_surrogate


def _per_sequence(values: Tensor, like: Tensor) -> Tensor:
    """A per-sequence loss ``[*P, B]`` broadcast to every token ``[*P, B, T]``."""
    return values.unsqueeze(-1).expand_as(like)


def _sequence_advantages(terms: PGTerms, who: str) -> Tensor:
    if terms.advantages.shape == terms.logp.shape:
        raise ValueError(
            f"advantages must be per sequence, shape {tuple(terms.logp.shape[:-1])}, for {who} "
            f"(a sequence-level loss); got per-token {tuple(terms.advantages.shape)}"
        )
    return terms.advantages


@register_estimator("gmpo")
@dataclass(frozen=True)
class GMPO(Estimator):
    """GMPO (Zhao et al. 2025, arXiv 2507.20673; verl ``geo_mean``): per sequence
    −Ā·exp(mean_t sgn(A_t)·min(sgn(A_t)·δ_t, sgn(A_t)·clip(δ_t, −ε_l, ε_h))), δ_t = log π_θ − log π_prox,
    Ā the mean token advantage: the geometric mean of token ratios, each clipped in log space.
    Defaults ε = 0.4 are the paper's (e^±0.4); the default aggregation averages over sequences."""

    eps_low: float = 0.4  # ε_l ≥ 0, in log space
    eps_high: float = 0.4  # ε_h ≥ 0, in log space
    aggregation: str = field(default="seq-mean-token-mean", kw_only=True)

    def check(self) -> None:
        check_range("eps_low", self.eps_low, low=0.0)
        check_range("eps_high", self.eps_high, low=0.0)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        mask, adv = terms.valid, terms.token_advantages
        delta = terms.logp - sg(terms.require_proximal(self.name))
        bounded = torch.clamp(delta, -self.eps_low, self.eps_high)
        sign = torch.sign(adv)
        clipped = sign * delta > sign * bounded  # the bounded branch is the min
        log_ratio = torch.where(clipped, bounded, delta) * (sign != 0)
        mean_log_ratio = masked_mean(log_ratio, mask, dims=(-1,))
        mean_adv = masked_mean(adv, mask, dims=(-1,))
        loss = -mean_adv * torch.exp(mean_log_ratio)
        return TokenLoss(
            _per_sequence(loss, terms.logp),
            metrics={"clip_frac": masked_mean(clipped.to(loss.dtype), mask)},
        )


@register_estimator("gspo_token")
@dataclass(frozen=True)
class GSPOToken(GSPO):
    """GSPO-token (Zheng et al. 2025, §4.3; TRL experimental ``importance_sampling_level='sequence_token'``):
    s_{i,t} = sg(s_i)·π_θ(y_t)/sg(π_θ(y_t)) in the clipped surrogate with per-token advantages A_{i,t},
    gradient Σ_t A_{i,t}·s_i·∇log π_θ(y_t)/|y_i| on unclipped tokens. ``gspo`` already uses this
    per-token form, so the two agree (tested); this name is the documented entry for token advantages."""


@register_estimator("luspo")
@dataclass(frozen=True)
class LUSPO(Estimator):
    """LUSPO (arXiv 2602.05261; TRL ``loss_type='luspo'``): GSPO's sequence loss
    ℓ_i = max(−s_i·A_i, −clip(s_i, 1−ε_l, 1+ε_h)·A_i) scaled by the sequence length, mean_i |y_i|·ℓ_i
    (the default aggregation seq-mean-token-sum), removing GSPO's bias toward short sequences.
    Needs per-sequence advantages; defaults ε are GSPO's."""

    eps_low: float = 3e-4  # ε_l in [0, 1]
    eps_high: float = 4e-4  # ε_h ≥ 0
    aggregation: str = field(default="seq-mean-token-sum", kw_only=True)

    def check(self) -> None:
        _check_ppo_fields(self.eps_low, self.eps_high, None)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        adv = _sequence_advantages(terms, self.name)
        prox = sg(terms.require_proximal(self.name))
        s = torch.exp(sequence_log_ratio(terms.logp, prox, terms.valid, geometric=True))
        loss, clip_flag, _ = clipped_surrogate(s, adv, self.eps_low, self.eps_high, None)
        seq_valid = terms.valid.any(-1)
        return TokenLoss(
            _per_sequence(loss, terms.logp),
            metrics={"clip_frac": masked_mean(clip_flag.to(loss.dtype), seq_valid, dims=(-1,))},
        )


@register_estimator("vespo")
@dataclass(frozen=True)
class VESPO(Estimator):
    """VESPO (arXiv 2602.10693; TRL ``loss_type='vespo'``): loss −sg(φ(ρ_i))·A·log π_θ with the
    Gamma-shaped weight φ(w) = e^λ·w^k·e^{−λw} (φ(1) = 1, peak at w = k/λ) of the product sequence
    ratio ρ_i = π_θ/μ; (k, λ) = (k_pos, λ_pos) for A ≥ 0, else (k_neg, λ_neg). Computed in log space
    without TRL's clamps of log ρ to [log 1e-8, 20]."""

    needs_behavior = True
    k_pos: float = 2.0  # power k ≥ 0 for A ≥ 0
    lambda_pos: float = 3.0  # decay λ > 0 for A ≥ 0
    k_neg: float = 3.0  # power k ≥ 0 for A < 0
    lambda_neg: float = 2.0  # decay λ > 0 for A < 0

    def check(self) -> None:
        check_range("k_pos", self.k_pos, low=0.0)
        check_range("lambda_pos", self.lambda_pos, low=0.0, low_open=True)
        check_range("k_neg", self.k_neg, low=0.0)
        check_range("lambda_neg", self.lambda_neg, low=0.0, low_open=True)

    def weight(self, terms: PGTerms) -> Tensor:
        """φ(ρ_i) per token (detached)."""
        log_w = sequence_log_ratio(sg(terms.logp), terms.require_behavior(self.name), terms.valid)
        log_w = _per_sequence(log_w, terms.logp)
        nonneg = terms.token_advantages >= 0
        k = torch.where(nonneg, log_w.new_full((), self.k_pos), log_w.new_full((), self.k_neg))
        lam = torch.where(nonneg, log_w.new_full((), self.lambda_pos), log_w.new_full((), self.lambda_neg))
        return torch.exp(lam + k * log_w - lam * torch.exp(log_w))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        phi = self.weight(terms)
        return TokenLoss(
            -phi * terms.token_advantages * terms.logp,
            metrics={"phi_mean": masked_mean(phi, terms.valid)},
        )
