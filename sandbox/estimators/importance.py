"""Importance-weighted policy gradients: exact, truncated, masked, V-trace and M2PO.

Each multiplies the REINFORCE term −A·log π_θ by a stop-gradient weight built from the
ratio w = π_θ/μ (per token) or ρ_i = exp Σ_t m·(log π_θ − log μ) (per sequence).
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
    sequence_log_ratio,
    sg,
)

LEVELS = ("token", "sequence")


def _token_ratio(terms: PGTerms, who: str) -> Tensor:
    return torch.exp(sg(terms.logp) - terms.require_behavior(who))


def _sequence_ratio(terms: PGTerms, who: str, geometric: bool = False) -> Tensor:
    """ρ_i (or the geometric s_i) broadcast to tokens, detached."""
    log_rho = sequence_log_ratio(sg(terms.logp), terms.require_behavior(who), terms.valid, geometric)
    return torch.exp(log_rho).unsqueeze(-1).expand_as(terms.logp)


def _fraction(flag: Tensor, mask: Tensor) -> Tensor:
    return masked_mean(flag.to(torch.get_default_dtype()), mask)


@register_estimator("is_pg")
@dataclass(frozen=True)
class ImportanceSampledPG(Estimator):
    """Exact importance-sampled PG: loss −sg(ρ_i)·A·log π_θ, ρ_i the product sequence ratio."""

    needs_behavior = True

    def token_loss(self, terms: PGTerms) -> Tensor:
        rho = _sequence_ratio(terms, self.name)
        return -rho * terms.token_advantages * terms.logp


@register_estimator("tis")
@dataclass(frozen=True)
class TruncatedIS(Estimator):
    """Truncated IS: loss −sg(min(w, C))·A·log π_θ; token ratio, or ρ_i with level='sequence'."""

    needs_behavior = True
    C: float = 2.0  # truncation level C > 0
    level: str = "token"  # 'token' | 'sequence'

    def check(self) -> None:
        check_range("C", self.C, low=0.0, low_open=True, finite=False)
        check_choice("level", self.level, LEVELS)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        w = _token_ratio(terms, self.name) if self.level == "token" else _sequence_ratio(terms, self.name)
        weight = torch.clamp(w, max=self.C)
        return TokenLoss(
            -weight * terms.token_advantages * terms.logp,
            metrics={"clip_frac": _fraction(w > self.C, terms.valid)},
        )


@register_estimator("mis")
@dataclass(frozen=True)
class MaskedIS(Estimator):
    """Masked IS (IcePop-style): loss −sg(w·1[α ≤ w ≤ β])·A·log π_θ; token or sequence level,
    ``geometric=True`` uses the geometric sequence ratio s_i (sequence level only)."""

    needs_behavior = True
    alpha: float = 0.5  # lower bound α ≥ 0
    beta: float = 5.0  # upper bound β > α
    level: str = "token"  # 'token' | 'sequence'
    geometric: bool = False

    def check(self) -> None:
        check_range("alpha", self.alpha, low=0.0)
        check_range("beta", self.beta, low=self.alpha, low_open=True, finite=False)
        check_choice("level", self.level, LEVELS)
        if self.geometric and self.level != "sequence":
            raise ValueError("geometric=True requires level='sequence' (the geometric ratio is per sequence)")

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        if self.level == "token":
            w = _token_ratio(terms, self.name)
        else:
            w = _sequence_ratio(terms, self.name, self.geometric)
        keep = (w >= self.alpha) & (w <= self.beta)
        weight = torch.where(keep, w, w.new_zeros(()))
        return TokenLoss(
            -weight * terms.token_advantages * terms.logp,
            metrics={"mask_frac": _fraction(~keep, terms.valid)},
        )


@register_estimator("vtrace_pg")
@dataclass(frozen=True)
class VTracePG(Estimator):
    """V-trace PG (Espeholt et al. 2018): loss −sg(min(ρ̄, w_s))·Â_s·log π_θ, with
    Â_s = r_s + γ·v_{s+1}, v_s = min(ρ̄, w_s)·r_s + γ·min(c̄, w_s)·v_{s+1} (value baseline 0: the
    advantages already carry the baseline). Per-token advantages are the rewards r_t; a
    per-sequence A is the reward of the last valid token. Single-step: truncated IS with C = ρ̄."""

    needs_behavior = True
    rho_bar: float = 1.0  # ρ̄ > 0
    c_bar: float = 1.0  # c̄ > 0
    gamma: float = 1.0  # discount γ in [0, 1]

    def check(self) -> None:
        check_range("rho_bar", self.rho_bar, low=0.0, low_open=True, finite=False)
        check_range("c_bar", self.c_bar, low=0.0, low_open=True, finite=False)
        check_range("gamma", self.gamma, low=0.0, high=1.0)

    def targets(self, terms: PGTerms) -> Tensor:
        """Â_s per token (detached), by the backward V-trace recursion."""
        mask = terms.valid
        w = _token_ratio(terms, self.name)
        one = w.new_ones(())
        rho = torch.where(mask, torch.clamp(w, max=self.rho_bar), one)
        c = torch.where(mask, torch.clamp(w, max=self.c_bar), one)
        if terms.advantages.shape == terms.logp.shape:
            rewards = torch.where(mask, terms.advantages, w.new_zeros(()))
        else:
            T = mask.shape[-1]
            last = (torch.arange(T, device=mask.device) * mask.long()).argmax(-1, keepdim=True)  # last valid index
            rewards = torch.zeros_like(w).scatter(-1, last, terms.advantages.unsqueeze(-1))
        rewards = sg(rewards)
        v_next = torch.zeros_like(w[..., 0])
        adv = torch.empty_like(w)
        for s in range(w.shape[-1] - 1, -1, -1):
            adv[..., s] = rewards[..., s] + self.gamma * v_next
            v_next = rho[..., s] * rewards[..., s] + self.gamma * c[..., s] * v_next
        return adv

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        w = _token_ratio(terms, self.name)
        weight = torch.clamp(w, max=self.rho_bar)
        return TokenLoss(
            -weight * self.targets(terms) * terms.logp,
            metrics={"clip_frac": _fraction(w > self.rho_bar, terms.valid)},
        )


@register_estimator("m2po")
@dataclass(frozen=True)
class M2PO(Estimator):
    """M2PO (second-moment trust): drop the tokens with the largest M2 = (log π_θ − log μ)² until
    the mean M2 of the kept tokens is ≤ τ, then plain token IS-PG −sg(w)·A·log π_θ averaged over
    the kept tokens."""

    @property
    def batch_dependent(self) -> bool:
        return True  # the mask is chosen from the batch's second moment

    needs_behavior = True
    tau: float = 0.04  # M2 budget τ > 0

    def check(self) -> None:
        check_range("tau", self.tau, low=0.0, low_open=True, finite=False)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        mask = terms.valid
        m2 = (sg(terms.logp) - terms.require_behavior(self.name)).pow(2)
        flat = torch.where(mask, m2, m2.new_full((), math.inf)).flatten(-2)
        values, order = torch.sort(flat, dim=-1, stable=True)
        n = torch.arange(1, flat.shape[-1] + 1, dtype=m2.dtype, device=m2.device)
        running_mean = torch.cumsum(torch.nan_to_num(values, posinf=0.0), -1) / n
        running_mean = torch.where(torch.isinf(values), m2.new_full((), math.inf), running_mean)
        n_keep = (running_mean <= self.tau).sum(-1, keepdim=True)  # running mean is non-decreasing
        keep_sorted = torch.arange(flat.shape[-1], device=m2.device) < n_keep
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        return keep.view_as(mask) & mask

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        keep = self.keep_mask(terms)
        w = _token_ratio(terms, self.name)
        return TokenLoss(
            -w * terms.token_advantages * terms.logp,
            mask=keep,
            metrics={"mask_frac": _fraction(~keep, terms.valid)},
        )
