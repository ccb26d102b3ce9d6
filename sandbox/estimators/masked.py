"""Token trust regions by masks and adaptive clips: DPPO, two-sided clipping, SAT, and verl's
rollout-correction rejection sampling.

r = π_θ/π_prox (π_prox defaults to μ). Each keeps the PPO-style ratio surrogate −r·A (or its clipped
form) and decides per token or per sequence which updates to trust.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
from sandbox.estimators.trust_region import _check_ppo_fields, _fraction, clipped_surrogate

RS_STATISTICS = ("k1", "k2", "k3")
RS_LEVELS = ("token", "seq_sum", "seq_mean", "seq_max")
RS_LOSSES = ("ppo_clip", "reinforce")


def _ratio(terms: PGTerms, who: str) -> Tensor:
    """r = π_θ/π_prox with the gradient flowing through π_θ."""
    return torch.exp(terms.logp - sg(terms.require_proximal(who)))


@register_estimator("dppo")
@dataclass(frozen=True)
class DPPO(Estimator):
    """DPPO-Binary-TV (arXiv 2602.04879; prime-rl's default loss): loss −1[kept]·r·A with r = π_θ/π_prox;
    a token is dropped when its probability moved past δ in the advantage's direction:
    π_θ(a) − π_prox(a) > δ_high for A > 0, < −δ_low for A < 0. prime-rl adds τ·(log π_θ − log μ)²
    with τ = 1e-3, hence ``kl_coef`` defaults to 1e-3 here. Dropped tokens stay in the normaliser.
    prime-rl anchors ratio and mask at μ; here at π_prox, whose default is μ."""

    needs_behavior = True
    authors_defaults = (
        "delta_low = delta_high = 0.15 and no KL term (the DPPO authors' verl recipe, "
        "verl-project/verl@8f11888 examples/dppo_trainer/run_qwen30b_dppo.sh, dppo_tv); ours are "
        "prime-rl's defaults (PrimeIntellect-ai/prime-rl@559b447 prime_rl/configs/trainer.py: "
        "dppo_mask_low/high 0.2, kl_tau 1e-3); the paper's value: not found (abstract only)"
    )
    delta_low: float = 0.2  # δ_low ≥ 0: largest allowed drop of π(a) for A < 0
    delta_high: float = 0.2  # δ_high ≥ 0: largest allowed rise of π(a) for A > 0
    kl_coef: float = field(default=1e-3, kw_only=True)

    def check(self) -> None:
        check_range("delta_low", self.delta_low, low=0.0)
        check_range("delta_high", self.delta_high, low=0.0)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B, T] bool: tokens whose probability change stays inside the trust region."""
        diff = torch.exp(sg(terms.logp)) - torch.exp(terms.require_proximal(self.name))
        adv = terms.token_advantages
        dropped = torch.where(adv > 0, diff > self.delta_high, diff < -self.delta_low)
        return ~dropped

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        keep = self.keep_mask(terms)
        adv = terms.token_advantages
        loss = -_ratio(terms, self.name) * adv * keep.to(terms.logp.dtype)
        valid = terms.valid
        return TokenLoss(
            loss,
            metrics={
                "mask_frac": _fraction(~keep, valid),
                "mask_high_frac": _fraction(~keep & (adv > 0), valid),
                "mask_low_frac": _fraction(~keep & (adv < 0), valid),
            },
        )


@register_estimator("two_sided_ppo")
@dataclass(frozen=True)
class TwoSidedPPO(Estimator):
    """Two-sided clipping (INTELLECT-2, arXiv 2505.07291; TRL ``delta``): loss
    −min(min(r, δ)·A, clip(r, 1−ε_l, 1+ε_h)·A). δ > 1+ε_h bounds the A < 0 update that PPO leaves
    unbounded; for A > 0 it is inactive. This equals ``ppo`` with ``dual_clip=δ`` (tested)."""

    eps_low: float = 0.2  # ε_l in [0, 1]
    eps_high: float = 0.2  # ε_h ≥ 0
    delta: float = 4.0  # δ > 1 + ε_h

    def check(self) -> None:
        _check_ppo_fields(self.eps_low, self.eps_high, None)
        check_range("delta", self.delta, low=1.0 + self.eps_high, low_open=True)

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        adv = terms.token_advantages
        r = _ratio(terms, self.name)
        capped = torch.clamp(r, max=self.delta)
        clipped = torch.clamp(r, 1.0 - self.eps_low, 1.0 + self.eps_high)
        loss = -torch.minimum(capped * adv, clipped * adv)
        valid = terms.valid
        return TokenLoss(
            loss,
            metrics={
                "clip_frac": _fraction(clipped * adv < capped * adv, valid),
                "delta_frac": _fraction((r > self.delta) & (adv < 0), valid),
            },
        )


@register_estimator("sat")
@dataclass(frozen=True)
class SAT(Estimator):
    """PROVISIONAL — placeholder kernel: Gaussian exp(−((s − τ)₊/h)²) with an absolute bandwidth h,
    where the paper uses a Hill kernel relative to the quantile τ (per an independent re-derivation;
    we could not read the paper); numbers will change when its kernel is implemented.
    Staleness-Adaptive Trust region (SAT, arXiv 2607.18722): PPO whose sign-selected clip endpoint
    contracts on the batch's high-staleness tail.

    Staleness s = |sg(log π_θ − log μ)|; τ = the ``quantile`` of s over the batch's valid tokens;
    κ = exp(−((s − τ)₊/h)²); the interval is [1 − ε_l·κ, 1 + ε_h] for A < 0 and [1 − ε_l, 1 + ε_h·κ]
    for A > 0. Tokens with s ≤ τ keep PPO's loss; every token's loss is ≥ PPO's (pointwise
    pessimism). Only the abstract and second-hand summaries were readable when this was written:
    the Gaussian kernel and its absolute bandwidth h are our stand-in for "staleness-based kernel
    scaling". What differs from the paper: the kernel's shape (Gaussian, not Hill) and its scale
    (h is absolute in units of |log ratio|, not relative to τ). The quantile threshold, the
    sign-selected endpoint and pointwise pessimism follow the abstract's description."""

    needs_behavior = True
    batch_dependent = True
    eps_low: float = 0.2  # nominal ε_l in [0, 1]
    eps_high: float = 0.2  # nominal ε_h ≥ 0
    quantile: float = 0.9  # tail threshold τ = this quantile of s, in [0, 1]
    bandwidth: float = 0.1  # kernel bandwidth h > 0

    def check(self) -> None:
        _check_ppo_fields(self.eps_low, self.eps_high, None)
        check_range("quantile", self.quantile, low=0.0, high=1.0)
        check_range("bandwidth", self.bandwidth, low=0.0, low_open=True)

    def contraction(self, terms: PGTerms) -> Tensor:
        """κ per token (detached), 1 below the batch quantile τ of the staleness s."""
        mask = terms.valid
        s = (sg(terms.logp) - terms.require_behavior(self.name)).abs()
        flat = torch.where(mask, s, s.new_full((), math.nan)).flatten(-2)
        tau = torch.nanquantile(flat, self.quantile, dim=-1)[..., None, None]
        excess = torch.where(mask, torch.clamp(s - tau, min=0.0), 0.0)
        return torch.exp(-(excess / self.bandwidth).pow(2))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        adv = terms.token_advantages
        kappa = self.contraction(terms)
        positive = adv > 0
        eps_low = torch.where(positive, kappa.new_full((), self.eps_low), self.eps_low * kappa)
        eps_high = torch.where(positive, self.eps_high * kappa, kappa.new_full((), self.eps_high))
        r = _ratio(terms, self.name)
        unclipped = -adv * r
        clipped = -adv * torch.minimum(torch.maximum(r, 1.0 - eps_low), 1.0 + eps_high)
        valid = terms.valid
        return TokenLoss(
            torch.maximum(unclipped, clipped),
            metrics={
                "clip_frac": _fraction(clipped > unclipped, valid),
                "contracted_frac": _fraction(kappa < 1.0, valid),
                "kappa_mean": masked_mean(kappa, valid),
            },
        )


@register_estimator("rollout_rs")
@dataclass(frozen=True)
class RolloutRejection(Estimator):
    """verl's rollout-correction rejection sampling (bypass mode; Liu et al. 2025, "When speed kills
    stability"): per token k1 = −log w, k2 = ½(log w)², k3 = w − 1 − log w with w = sg(π_θ)/μ;
    ``level`` keeps tokens (token) or whole sequences by the sum, mean or max of the statistic;
    kept iff log(lower) ≤ k1 ≤ log(upper) (k1) or k ≤ upper (k2, k3). On the kept tokens (rejected
    ones leave the normaliser): ``ppo_clip`` max(−r·A, −clip(r, 1±ε)·A) with verl's dual clip
    min(·, c·|A|) for A < 0, or ``reinforce`` −A·log π_θ. Defaults are verl's
    ``bypass_ppo_clip_k3_rs`` preset, c = 3 (``clip_ratio_c``).

    Source read: volcengine/verl at commit b178a3cd56f58b2d502255daba591e92833930a7 —
    ``verl/trainer/ppo/core_algos.py::compute_policy_loss_bypass_mode`` sends ``loss_type="ppo_clip"``
    to ``compute_policy_loss_vanilla`` (with old_log_prob = rollout_log_prob), which applies
    ``pg_losses3 = −A·clip_ratio_c``, ``torch.where(A < 0, min(pg_losses3, max(−r·A, −clip(r)·A)),
    max(…))``; ``clip_ratio_c`` is 3.0 in ``verl/trainer/config/actor/actor.yaml`` and verl asserts
    c > 1. Hence a kept token with r = 4, A = −1 has loss 3 and zero gradient. verl also clamps
    log r to ±20 before the exp; that clamp is not modelled. ``dual_clip=None`` (or ∞) turns the
    dual clip off; ``reinforce`` ignores it (verl's REINFORCE loss has none)."""

    needs_behavior = True
    authors_defaults = (
        "as ours (volcengine/verl@b178a3c: RolloutCorrectionConfig.bypass_ppo_clip_k3_rs, "
        "clip_ratio 0.2, clip_ratio_c 3)"
    )
    statistic: str = "k3"  # 'k1' | 'k2' | 'k3'
    level: str = "seq_mean"  # 'token' | 'seq_sum' | 'seq_mean' | 'seq_max' (k2, k3 only)
    upper: float = 0.01  # upper bound > 0 (a ratio bound for k1, a divergence bound for k2/k3)
    lower: float | None = None  # k1 only: lower ratio bound in (0, upper]; None means 1/upper
    loss: str = "ppo_clip"  # 'ppo_clip' | 'reinforce'
    eps: float = 0.2  # ppo_clip's ε in [0, 1]
    dual_clip: float | None = 3.0  # ppo_clip's dual clip c > 1 (verl clip_ratio_c); None or inf: off

    def check(self) -> None:
        check_choice("statistic", self.statistic, RS_STATISTICS)
        check_choice("level", self.level, RS_LEVELS)
        check_choice("loss", self.loss, RS_LOSSES)
        check_range("upper", self.upper, low=0.0, low_open=True)
        check_range("eps", self.eps, low=0.0, high=1.0)
        check_range("dual_clip", self.dual_clip, low=1.0, low_open=True, allow_none=True, finite=False)
        if self.statistic == "k1":
            if self.level == "seq_max":
                raise ValueError("level must be one of ['token', 'seq_sum', 'seq_mean'] for statistic='k1', got 'seq_max'")
            if self.lower is None:  # symmetric bounds [1/upper, upper] need upper > 1
                check_range("upper", self.upper, low=1.0, low_open=True)
            check_range("lower", self.bounds[0], low=0.0, high=self.upper, low_open=True)
        elif self.lower is not None:
            raise ValueError(f"lower must be None for statistic={self.statistic!r} (upper bound only), got {self.lower}")

    @property
    def bounds(self) -> tuple[float, float]:
        """(lower, upper) on the statistic: in log space for k1, (−∞, upper) for k2/k3."""
        if self.statistic != "k1":
            return -math.inf, self.upper
        lower = 1.0 / self.upper if self.lower is None else self.lower
        return lower, self.upper

    def statistic_values(self, terms: PGTerms) -> Tensor:
        """The chosen statistic per token ``[*P, B, T]`` or per sequence ``[*P, B]`` (detached)."""
        log_w = sg(terms.logp) - terms.require_behavior(self.name)
        per_token = {"k1": -log_w, "k2": 0.5 * log_w.pow(2), "k3": torch.expm1(log_w) - log_w}[self.statistic]
        mask = terms.valid
        if self.level == "token":
            return per_token
        if self.level == "seq_max":
            return torch.where(mask, per_token, per_token.new_full((), -math.inf)).amax(-1)
        total = torch.where(mask, per_token, per_token.new_zeros(())).sum(-1)
        return total if self.level == "seq_sum" else total / mask.sum(-1).clamp(min=1).to(total.dtype)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        """[*P, B, T] bool: the valid tokens that pass the rejection test."""
        stat = self.statistic_values(terms)
        low, high = self.bounds
        if self.statistic == "k1":
            low, high = math.log(low), math.log(high)
        keep = (stat >= low) & (stat <= high)
        if self.level != "token":
            keep = keep.unsqueeze(-1).expand_as(terms.logp)
        return keep & terms.valid

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        keep = self.keep_mask(terms)
        adv = terms.token_advantages
        valid = terms.valid
        metrics = {}
        if self.loss == "reinforce":
            values = -adv * terms.logp
        else:
            cap = None if self.dual_clip is None or math.isinf(self.dual_clip) else self.dual_clip
            values, clip_flag, dual_flag = clipped_surrogate(_ratio(terms, self.name), adv, self.eps, self.eps, cap)
            metrics = {"clip_frac": _fraction(clip_flag & keep, valid), "dual_clip_frac": _fraction(dual_flag & keep, valid)}
        return TokenLoss(
            values,
            mask=keep,
            metrics={
                "reject_frac": _fraction(~keep, valid),
                "reject_seq_frac": masked_mean((~keep & valid).any(-1).to(values.dtype), valid.any(-1), dims=(-1,)),
                **metrics,
            },
        )
