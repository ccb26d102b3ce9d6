"""Targets instead of ratios: TOPR (successes fit as supervised targets, failures tapered) and TPO
(fit the policy over a group to the target q ∝ p_old·e^{u/η} by cross-entropy)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_range, on_host
from sandbox.estimators.base import (
    Estimator,
    PGTerms,
    TokenLoss,
    masked_mean,
    register_estimator,
    sequence_log_ratio,
    sg,
)
from sandbox.estimators.sequence import _per_sequence, _sequence_advantages

TOPR_LEVELS = ("sequence", "token")


@register_estimator("topr")
@dataclass(frozen=True)
class TOPR(Estimator):
    """TOPR, tapered off-policy REINFORCE (Le Roux et al. 2025, arXiv 2503.14286; ROLL ``topr``):
    loss −w₊·A·log π_θ where A > 0 (plain SFT-like REINFORCE, no ratio) and
    −w₋·sg(min(ρ, 1))·A·log π_θ where A ≤ 0, ρ = π_θ/μ per sequence (the paper) or per token (ROLL).
    The paper splits on the reward's sign; here on A's (the same with a zero baseline)."""

    needs_behavior = True
    level: str = "sequence"  # 'sequence' (paper) | 'token' (ROLL)
    positive_weight: float = 1.0  # w₊ ≥ 0
    negative_weight: float = 1.0  # w₋ ≥ 0

    def check(self) -> None:
        check_choice("level", self.level, TOPR_LEVELS)
        check_range("positive_weight", self.positive_weight, low=0.0)
        check_range("negative_weight", self.negative_weight, low=0.0)

    def taper(self, terms: PGTerms) -> Tensor:
        """min(ρ, 1) per token (detached)."""
        behavior = terms.require_behavior(self.name)
        if self.level == "token":
            log_rho = sg(terms.logp) - behavior
        else:
            log_rho = _per_sequence(sequence_log_ratio(sg(terms.logp), behavior, terms.valid), terms.logp)
        return torch.exp(torch.clamp(log_rho, max=0.0))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        adv = terms.token_advantages
        positive = adv > 0
        taper = self.taper(terms)
        weight = torch.where(positive, taper.new_full((), self.positive_weight), self.negative_weight * taper)
        valid = terms.valid
        return TokenLoss(
            -weight * adv * terms.logp,
            metrics={
                "pos_frac": masked_mean(positive.to(adv.dtype), valid),
                "neg_taper_mean": masked_mean(taper, valid & ~positive),
            },
        )


def _sequence_logp(logp: Tensor, mask: Tensor) -> Tensor:
    """log π(y_i) = Σ_t m·log π(y_t) per sequence ``[*P, B]``."""
    return torch.where(mask, logp, logp.new_zeros(())).sum(-1)


def _group_logsumexp(values: Tensor, onehot: Tensor, group: Tensor) -> Tensor:
    """log Σ_{j in group(i)} exp(values_j) for every row i (``onehot`` [*P, B, G] marks members)."""
    member = onehot > 0
    members = torch.where(member, values.unsqueeze(-1), values.new_full((), -torch.inf))
    # an empty group would be all −inf, whose logsumexp has a NaN gradient: give it zeros instead
    members = torch.where(member.any(-2, keepdim=True), members, values.new_zeros(()))
    return members.logsumexp(-2).gather(-1, group)


@register_estimator("tpo")
@dataclass(frozen=True)
class TPO(Estimator):
    """TPO, Target Policy Optimization (Kaddour 2026, arXiv 2604.06159): per group of candidates,
    target q_i ∝ p_old(y_i)·exp(u_i/η), u = the group-standardised advantages (population std;
    u = A − mean when the std is 0), fitted by cross-entropy −Σ_i q_i·log p^θ_i with
    p^θ = softmax over the group of log π_θ(y_i) (token sums); mean over groups. Gradient on
    log π_θ(y_i): (p^θ_i − q_i)/n_groups. p_old is μ when given, else sg(π_θ) (the paper's on-policy
    form). ``group`` None means one group. Each token carries its sequence's loss scaled by
    n_seq/n_groups, so the default seq-mean-token-mean is the mean over groups; other aggregations
    reweight sequences as for ``gmpo``."""

    batch_dependent = True
    eta: float = 1.0  # target temperature η > 0
    aggregation: str = field(default="seq-mean-token-mean", kw_only=True)

    def check(self) -> None:
        check_range("eta", self.eta, low=0.0, low_open=True)

    def _groups(self, terms: PGTerms) -> tuple[Tensor, Tensor]:
        """(group ids [*P, B], membership one-hot [*P, B, G] over rows with a valid token)."""
        shape = terms.logp.shape[:-1]
        group = terms.group
        if group is None:
            group = torch.zeros(shape[-1], dtype=torch.long, device=terms.logp.device)
        if on_host(group) and bool((group < 0).any()):
            raise ValueError("group ids must be non-negative integers")
        group = group.expand(shape).long()
        n_groups = int(group.max()) + 1 if on_host(group) else group.shape[-1]  # as advantages.group_stats
        onehot = torch.nn.functional.one_hot(group, n_groups).to(terms.logp.dtype)
        return group, onehot * terms.valid.any(-1).unsqueeze(-1).to(onehot.dtype)

    def target(self, terms: PGTerms) -> Tensor:
        """q per sequence ``[*P, B]`` (detached); 0 for rows without valid tokens."""
        adv = sg(_sequence_advantages(terms, self.name))
        group, onehot = self._groups(terms)
        seq_valid = terms.valid.any(-1)
        counts = onehot.sum(-2).clamp(min=1.0)
        mean = torch.einsum("...bg,...b->...g", onehot, adv) / counts
        centred = adv - mean.gather(-1, group)
        var = torch.einsum("...bg,...b->...g", onehot, centred.pow(2)) / counts
        std = var.sqrt().gather(-1, group)
        u = torch.where(std > 1e-6, centred / std.clamp(min=1e-6), centred)
        old = sg(terms.logp) if terms.behavior_logp is None else terms.behavior_logp
        old_scores = _sequence_logp(old, terms.valid)
        z = torch.where(seq_valid, old_scores + u / self.eta, adv.new_zeros(()))
        return torch.where(seq_valid, torch.exp(z - _group_logsumexp(z, onehot, group)), adv.new_zeros(()))

    def token_loss(self, terms: PGTerms) -> TokenLoss:
        group, onehot = self._groups(terms)
        mask, seq_valid = terms.valid, terms.valid.any(-1)
        q = self.target(terms)
        scores = _sequence_logp(terms.logp, mask)
        log_p = torch.where(seq_valid, scores - _group_logsumexp(scores, onehot, group), 0.0)
        n_seq = seq_valid.sum(-1, keepdim=True).to(q.dtype)
        n_groups = (onehot.sum(-2) > 0).sum(-1, keepdim=True).to(q.dtype)
        per_seq = -q * log_p * n_seq / n_groups  # the sequence mean is then a mean over groups
        return TokenLoss(
            _per_sequence(per_seq, terms.logp),
            metrics={"target_gap": masked_mean((torch.exp(sg(log_p)) - q).abs(), seq_valid, dims=(-1,))},
        )
