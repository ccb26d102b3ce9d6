"""Covariance-targeted updates (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models", arXiv 2505.22617; verl ``clip_cov`` / ``kl_cov``).

Entropy falls fastest through tokens whose centred advantage and centred log-probability covary
most: Cov_t = (A_t − mean A)·(log π_θ(a_t) − mean log π_θ), means over the batch's valid tokens.
Both estimators treat a small fraction of those tokens specially; both depend on the whole batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_range
from sandbox.estimators.base import (
    Estimator,
    PGTerms,
    TokenLoss,
    masked_mean,
    register_estimator,
    sg,
)
from sandbox.estimators.trust_region import _check_ppo_fields, clipped_surrogate


def token_covariance(terms: PGTerms) -> Tensor:
    """Cov_t per token ``[*P, B, T]`` (detached), centred over each member's valid tokens."""
    mask, adv, logp = terms.valid, terms.token_advantages, sg(terms.logp)
    adv_c = adv - masked_mean(adv, mask)[..., None, None]
    logp_c = logp - masked_mean(logp, mask)[..., None, None]
    return sg(adv_c * logp_c)


def _top(scores: Tensor, eligible: Tensor, counts: Tensor) -> Tensor:
    """[*P, B, T] bool: per member, the ``counts`` eligible tokens with the largest scores."""
    flat = torch.where(eligible, scores, scores.new_full((), -math.inf)).flatten(-2)
    order = torch.argsort(flat, dim=-1, descending=True, stable=True)
    ranks = torch.empty_like(order).scatter_(-1, order, torch.arange(flat.shape[-1], device=flat.device).expand_as(order))
    return (ranks < counts.unsqueeze(-1)).view_as(eligible) & eligible


def _count(fraction: float, mask: Tensor) -> Tensor:
    """max(⌊fraction·n_valid⌋, 1) per member, as verl does."""
    n_valid = mask.flatten(-2).sum(-1).to(torch.float64)
    return torch.floor(fraction * n_valid).clamp(min=1).long()


@register_estimator("clip_cov")
@dataclass(frozen=True)
class ClipCov(Estimator):
    """Clip-Cov: the ``ppo`` loss max(−r·A, −clip(r, 1−ε_l, 1+ε_h)·A) (no dual clip), zeroed (value and
    gradient, as verl does) on ⌊ratio·n_valid⌋ (at least 1) tokens drawn uniformly from the valid
    tokens that PPO did not clip and whose Cov_t lies in (lb, ub). Needs ``generator`` for the draw."""

    batch_dependent = True
    authors_defaults = (
        "eps_low = eps_high = 1 (clip_ratio_low/high=1 in recipe/dapo/7b_clip_cov.sh and "
        "32b_clip_cov.sh, PRIME-RL/Entropy-Mechanism-of-RL@8850579; verl's port of the recipe, "
        "volcengine/verl@246cac4 recipe/entropy, the same); ratio, cov_lb, cov_ub as ours"
    )
    ratio: float = 2e-4  # fraction of tokens detached, in (0, 1]
    cov_lb: float = 1.0  # lower covariance bound
    cov_ub: float = 5.0  # upper covariance bound > cov_lb
    eps_low: float = 0.2  # ε_l in [0, 1]
    eps_high: float = 0.2  # ε_h ≥ 0

    def check(self) -> None:
        check_range("ratio", self.ratio, low=0.0, high=1.0, low_open=True)
        check_range("cov_lb", self.cov_lb)
        check_range("cov_ub", self.cov_ub, low=self.cov_lb, low_open=True)
        _check_ppo_fields(self.eps_low, self.eps_high, None)

    def zeroed_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B, T] bool: the tokens whose loss is zeroed."""
        ratio = torch.exp(sg(terms.logp) - terms.require_proximal(self.name))
        _, clip_flag, _ = clipped_surrogate(ratio, terms.token_advantages, self.eps_low, self.eps_high, None)
        cov = token_covariance(terms)
        eligible = terms.valid & ~clip_flag & (cov > self.cov_lb) & (cov < self.cov_ub)
        gen = terms.require_generator(self.name)
        keys = torch.rand(terms.logp.shape, generator=gen, dtype=terms.logp.dtype)
        return _top(keys, eligible, _count(self.ratio, terms.valid))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        ratio = torch.exp(terms.logp - sg(terms.require_proximal(self.name)))
        loss, clip_flag, _ = clipped_surrogate(ratio, terms.token_advantages, self.eps_low, self.eps_high, None)
        zeroed = self.zeroed_mask(terms)
        valid = terms.valid
        return TokenLoss(
            loss * (~zeroed).to(loss.dtype),
            metrics={
                "clip_frac": masked_mean(clip_flag.to(loss.dtype), valid),
                "cov_zeroed_frac": masked_mean(zeroed.to(loss.dtype), valid),
            },
        )


@register_estimator("kl_cov")
@dataclass(frozen=True)
class KLCov(Estimator):
    """KL-Cov: loss −r·A (no clip), plus c·|log r| on the ⌊ratio·n_valid⌋ (at least 1) valid tokens
    with the largest Cov_t, r = π_θ/π_prox."""

    batch_dependent = True
    authors_defaults = (
        "ratio = 2e-3 (7B) or 2e-4 (32B), coef = 1 (k_percent=0.2 / 0.02, a percentage, and "
        "ppo_kl_coef=1 in recipe/dapo/7b_kl_cov.sh, 32b_kl_cov.sh, "
        "PRIME-RL/Entropy-Mechanism-of-RL@8850579); verl's config default is ratio 2e-4, coef 0.1 "
        "(volcengine/verl@b178a3c verl/trainer/config/actor/actor.yaml)"
    )
    ratio: float = 2e-4  # fraction of tokens penalised, in (0, 1]
    coef: float = 1.0  # c ≥ 0 (verl ``ppo_kl_coef``)

    def check(self) -> None:
        check_range("ratio", self.ratio, low=0.0, high=1.0, low_open=True)
        check_range("coef", self.coef, low=0.0)

    def penalised_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B, T] bool: the tokens with the largest covariance."""
        return _top(token_covariance(terms), terms.valid, _count(self.ratio, terms.valid))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        log_r = terms.logp - sg(terms.require_proximal(self.name))
        picked = self.penalised_mask(terms)
        loss = -terms.token_advantages * torch.exp(log_r) + self.coef * log_r.abs() * picked.to(log_r.dtype)
        return TokenLoss(loss, metrics={"cov_penalised_frac": masked_mean(picked.to(loss.dtype), terms.valid)})
