"""Trust-region family: PPO, decoupled PPO, GSPO, CISPO, SAPO, OPSM, PMPO.

r = π_θ/π_prox is the ratio to the proximal (anchor) policy, which defaults to μ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.validation import check_range
from sandbox.estimators.base import (
    Estimator,
    EstimatorOutput,
    PGTerms,
    TokenLoss,
    aggregate,
    masked_mean,
    register_estimator,
    sequence_log_ratio,
    sg,
)


def _fraction(flag: Tensor, mask: Tensor) -> Tensor:
    return masked_mean(flag.to(torch.get_default_dtype()), mask)


def clipped_surrogate(
    ratio: Tensor, adv: Tensor, eps_low: float, eps_high: float, dual_clip: float | None
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO's per-token loss max(−r·A, −clip(r, 1−ε_l, 1+ε_h)·A), with the dual clip
    min(·, c·|A|) for A < 0 (Ye et al. 2020). Returns (loss, clipped flag, dual-clipped flag)."""
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    clip_flag = clipped > unclipped
    dual_flag = torch.zeros_like(clip_flag)
    if dual_clip is not None:
        cap = -dual_clip * adv
        dual_flag = (adv < 0) & (loss > cap)
        loss = torch.where(dual_flag, cap, loss)
    return loss, clip_flag, dual_flag


def _check_ppo_fields(eps_low: float, eps_high: float, dual_clip: float | None) -> None:
    check_range("eps_low", eps_low, low=0.0, high=1.0)
    check_range("eps_high", eps_high, low=0.0, finite=False)
    check_range("dual_clip", dual_clip, low=1.0, low_open=True, allow_none=True)


@register_estimator("ppo")
@dataclass(frozen=True)
class PPO(Estimator):
    """PPO clip (Schulman et al. 2017): loss max(−r·A, −clip(r, 1−ε_l, 1+ε_h)·A), r = π_θ/π_prox;
    ``dual_clip=c`` caps the A<0 loss at c·|A| (None disables it)."""

    eps_low: float = 0.2  # ε_l in [0, 1]
    eps_high: float = 0.2  # ε_h ≥ 0
    dual_clip: float | None = 3.0  # c > 1, or None

    def check(self) -> None:
        _check_ppo_fields(self.eps_low, self.eps_high, self.dual_clip)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        ratio = torch.exp(terms.logp - sg(terms.require_proximal(self.name)))
        loss, clip_flag, dual_flag = clipped_surrogate(
            ratio, terms.token_advantages, self.eps_low, self.eps_high, self.dual_clip
        )
        return TokenLoss(
            loss,
            metrics={
                "clip_frac": _fraction(clip_flag, terms.valid),
                "dual_clip_frac": _fraction(dual_flag, terms.valid),
            },
        )


@register_estimator("decoupled_ppo")
@dataclass(frozen=True)
class DecoupledPPO(Estimator):
    """Decoupled PPO (AReaL, Fu et al. 2025): loss −sg(min(k, k_max))·min(u·A, clip(u, 1±ε)·A),
    u = π_θ/π_prox (trust region), k = π_prox/μ (off-policy correction)."""

    recomputes_proximal = True

    needs_behavior = True
    eps: float = 0.2  # ε in [0, 1]
    k_max: float = math.inf  # cap on the behaviour correction, > 0

    def check(self) -> None:
        check_range("eps", self.eps, low=0.0, high=1.0)
        check_range("k_max", self.k_max, low=0.0, low_open=True, finite=False)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        prox = sg(terms.require_proximal(self.name))
        u = torch.exp(terms.logp - prox)
        k = torch.exp(prox - terms.require_behavior(self.name))
        weight = torch.clamp(k, max=self.k_max)
        loss, clip_flag, _ = clipped_surrogate(u, terms.token_advantages, self.eps, self.eps, None)
        return TokenLoss(
            weight * loss,
            metrics={
                "clip_frac": _fraction(clip_flag, terms.valid),
                "behavior_weight_mean": masked_mean(weight, terms.valid),
            },
        )


@register_estimator("gspo")
@dataclass(frozen=True)
class GSPO(Estimator):
    """GSPO (Zheng et al. 2025): max(−s_i·A, −clip(s_i, 1−ε_l, 1+ε_h)·A) with the geometric
    sequence ratio s_i = exp(mean_t m·(log π_θ − log π_prox)); per token s_{i,t} = sg(s_i)·π_θ/sg(π_θ)
    so the gradient is s_i·A·mean_t ∇log π_θ under the default seq-mean-token-mean."""

    eps_low: float = 3e-4  # ε_l in [0, 1]
    eps_high: float = 4e-4  # ε_h ≥ 0
    aggregation: str = field(default="seq-mean-token-mean", kw_only=True)

    def check(self) -> None:
        _check_ppo_fields(self.eps_low, self.eps_high, None)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        prox = sg(terms.require_proximal(self.name))
        log_s = sequence_log_ratio(sg(terms.logp), prox, terms.valid, geometric=True)
        ratio = torch.exp(log_s.unsqueeze(-1) + terms.logp - sg(terms.logp))
        loss, clip_flag, _ = clipped_surrogate(
            ratio, terms.token_advantages, self.eps_low, self.eps_high, None
        )
        return TokenLoss(loss, metrics={"clip_frac": _fraction(clip_flag, terms.valid)})


@register_estimator("cispo")
@dataclass(frozen=True)
class CISPO(Estimator):
    """CISPO (MiniMax-M1, 2025): loss −sg(clip(r, 1−ε_l, 1+ε_h))·A·log π_θ; clips the IS weight,
    never the gradient. ε_l = ∞ means no lower clip."""

    authors_defaults = (
        "not found (the MiniMax-M1 paper was not read); verl's example, not the authors', uses "
        "eps_low = 10, eps_high = 0.2 (volcengine/verl@b178a3c "
        "examples/cispo_trainer/run_cispo_qwen2_5_0_5b_gsm8k.sh)"
    )
    eps_low: float = math.inf  # ε_l ≥ 0 (∞: no lower clip)
    eps_high: float = 4.0  # ε_h ≥ 0

    def check(self) -> None:
        check_range("eps_low", self.eps_low, low=0.0, finite=False)
        check_range("eps_high", self.eps_high, low=0.0, finite=False)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        r = torch.exp(sg(terms.logp) - sg(terms.require_proximal(self.name)))
        lower = 1.0 - self.eps_low
        w = torch.clamp(r, min=None if math.isinf(lower) else lower, max=1.0 + self.eps_high)
        clipped = (r > 1.0 + self.eps_high) | (r < lower)
        return TokenLoss(
            -w * terms.token_advantages * terms.logp,
            metrics={"clip_frac": _fraction(clipped, terms.valid)},
        )


@register_estimator("sapo")
@dataclass(frozen=True)
class SAPO(Estimator):
    """SAPO (soft adaptive policy optimisation): loss −(4/τ)·σ(τ(r−1))·A, τ = τ_pos if A > 0 else
    τ_neg; a smooth gate in place of the hard clip, with gradient A·∇log π_θ at r = 1."""

    tau_pos: float = 1.0  # τ_pos > 0
    tau_neg: float = 1.05  # τ_neg > 0

    def check(self) -> None:
        check_range("tau_pos", self.tau_pos, low=0.0, low_open=True)
        check_range("tau_neg", self.tau_neg, low=0.0, low_open=True)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        adv = terms.token_advantages
        r = torch.exp(terms.logp - sg(terms.require_proximal(self.name)))
        tau = torch.where(adv > 0, r.new_full((), self.tau_pos), r.new_full((), self.tau_neg))
        gate = torch.sigmoid(tau * (r - 1.0))
        return TokenLoss(-(4.0 / tau) * gate * adv, metrics={"gate_mean": masked_mean(sg(gate), terms.valid)})


@register_estimator("opsm")
@dataclass(frozen=True)
class OPSM(Estimator):
    """Off-policy sequence masking (DeepSeek-V3.2): the ``ppo`` loss on sequences kept iff A ≥ 0 or
    mean_t(log μ − log π_θ) ≤ δ; masked sequences contribute zero but stay in the normaliser."""

    needs_behavior = True
    delta: float = 0.5  # KL threshold δ ≥ 0
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float | None = 3.0

    def check(self) -> None:
        check_range("delta", self.delta, low=0.0, finite=False)
        _check_ppo_fields(self.eps_low, self.eps_high, self.dual_clip)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B] bool: the sequences kept."""
        mask = terms.valid
        mean_kl = sequence_log_ratio(terms.require_behavior(self.name), sg(terms.logp), mask, geometric=True)
        seq_adv = masked_mean(terms.token_advantages, mask, dims=(-1,))
        return (seq_adv >= 0) | (mean_kl <= self.delta)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        keep = self.keep_mask(terms)
        ratio = torch.exp(terms.logp - sg(terms.require_proximal(self.name)))
        loss, clip_flag, _ = clipped_surrogate(
            ratio, terms.token_advantages, self.eps_low, self.eps_high, self.dual_clip
        )
        seq_valid = terms.valid.any(-1)
        return TokenLoss(
            loss * keep.unsqueeze(-1).to(loss.dtype),
            metrics={
                "mask_frac": masked_mean((~keep).to(loss.dtype), seq_valid, dims=(-1,)),
                "clip_frac": _fraction(clip_flag, terms.valid),
            },
        )


@register_estimator("pmpo")
@dataclass(frozen=True)
class PMPO(Estimator):
    """PMPO (Abdolmaleki et al. 2025): −α·mean_{A>0} log π_θ + (1−α)·mean_{A<0} log π_θ
    + β·KL(μ‖π_θ); each mean uses the estimator's aggregation over that subset of tokens, the KL is
    the k1 estimate mean(log μ − log π_θ) (its gradient is exact)."""

    @property
    def batch_dependent(self) -> bool:
        return True  # normalised over the batch's positive and negative sets

    alpha: float = 0.5  # weight of the positive set, in [0, 1]
    beta: float = 0.0  # KL coefficient β ≥ 0 (needs μ when > 0)

    def check(self) -> None:
        check_range("alpha", self.alpha, low=0.0, high=1.0)
        check_range("beta", self.beta, low=0.0)

    def __call__(self, terms: PGTerms) -> EstimatorOutput:
        if not isinstance(terms, PGTerms):
            raise ValueError(f"terms must be a PGTerms, got {type(terms).__name__}")
        mask, adv, logp = terms.valid, terms.token_advantages, terms.logp
        pos, neg = mask & (adv > 0), mask & (adv < 0)
        loss = -self.alpha * aggregate(logp, pos, self.aggregation)
        loss = loss + (1.0 - self.alpha) * aggregate(logp, neg, self.aggregation)
        if self.beta > 0:
            behavior = terms.require_behavior(f"{self.name} with beta > 0")
            loss = loss + self.beta * aggregate(behavior - logp, mask, self.aggregation)
        metrics = TokenLoss(
            logp,
            metrics={"pos_frac": _fraction(pos, mask), "neg_frac": _fraction(neg, mask)},
        )
        return EstimatorOutput(loss=loss.sum(), metrics=self.diagnostics(terms, metrics))
