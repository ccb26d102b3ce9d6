"""Baselines and advantage shaping: A = R − b (optionally rescaled).

Rewards are per sequence ``[*P, B]``; ``group`` ``[*P, B]`` or ``[B]`` names the prompt/context of
each sequence. A group of one sequence has no peer to compare with: group baselines give it A = 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from sandbox.core.registry import Registry
from sandbox.core.validation import check_choice, check_range, check_shape, check_tensor, on_host

ADVANTAGES: Registry[Advantage] = Registry("advantage")
#: the inputs beyond (rewards, group) an advantage may list in ``needs``
EXTRAS = ("grad_sq_norms", "mask", "probs", "rho")


def register_advantage(name: str, *, replace: bool = False):
    return ADVANTAGES.register(name, replace=replace)


def make_advantage(name: str, **kwargs) -> Advantage:
    """``make_advantage("grpo")``; unknown names or fields raise ``ValueError``."""
    return ADVANTAGES.make(name, **kwargs)


def _check_rewards_group(rewards: Tensor, group: Tensor | None) -> Tensor:
    check_tensor("rewards", rewards, dtype="float")
    if rewards.ndim < 1 or rewards.numel() == 0:
        raise ValueError(f"rewards must have shape [*P, B] with B ≥ 1, got {tuple(rewards.shape)}")
    if group is None:
        return torch.zeros(rewards.shape[-1], dtype=torch.long, device=rewards.device)
    check_tensor("group", group, dtype="int")
    if tuple(group.shape) not in (tuple(rewards.shape), tuple(rewards.shape[-1:])):
        raise ValueError(
            f"group must have shape {tuple(rewards.shape)} or {tuple(rewards.shape[-1:])} matching "
            f"rewards, got {tuple(group.shape)}"
        )
    if on_host(group) and bool((group < 0).any()):
        raise ValueError("group ids must be non-negative integers")
    return group


def group_stats(values: Tensor, group: Tensor, weights: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per-sequence (weighted) group sums: returns (Σ_group w·v, Σ_group w) gathered back to ``[*P, B]``."""
    # the number of groups is asked of the host on the CPU; on an accelerator one column per row
    # (ids are < B) keeps the host out of the step, and the extra all-zero columns change no sum
    n_groups = int(group.max()) + 1 if on_host(group) else group.shape[-1]
    onehot = torch.nn.functional.one_hot(group, n_groups).to(values.dtype)  # [*P?, B, G]
    w = torch.ones_like(values) if weights is None else weights
    onehot = onehot.expand(*values.shape, n_groups)
    sums = torch.einsum("...b,...bg->...g", w * values, onehot)
    counts = torch.einsum("...b,...bg->...g", w, onehot)
    return torch.einsum("...g,...bg->...b", sums, onehot), torch.einsum("...g,...bg->...b", counts, onehot)


@dataclass(frozen=True)
class Advantage:
    """Base class: ``advantage(rewards, group, **extras) -> A`` with the same shape as rewards.

    Extras (only those an advantage lists in ``needs``): ``probs`` [*P, B, K] the policy's action
    distribution per context (detached), ``rho`` [*P, B] sequence ratios π_θ/μ, ``grad_sq_norms``
    [*P, B] ‖∇log π(τ_i)‖², ``mask`` [*P, B, T] the rollout's valid tokens (bool).
    """

    name: ClassVar[str] = "advantage"
    needs: ClassVar[tuple[str, ...]] = ()
    #: the baseline of a row depends only on its own context (not on the other samples drawn), so an
    #: exact expected update can enumerate actions one by one
    per_context: ClassVar[bool] = False
    #: the baseline of a row is taken from the other samples of its group (0 for a group of one)
    baseline_from_group: ClassVar[bool] = False

    def __call__(
        self,
        rewards: Float[Tensor, "*P B"],
        group: Int[Tensor, "*P B"] | None = None,
        **extras: Tensor | None,
    ) -> Float[Tensor, "*P B"]:
        group = _check_rewards_group(rewards, group)
        unknown = sorted(set(extras) - set(EXTRAS))
        if unknown:
            raise ValueError(f"unknown advantage input(s) {unknown}; valid: {sorted(EXTRAS)}")
        return self.compute(rewards, group, **extras)

    def compute(self, rewards: Tensor, group: Tensor, **extras: Tensor | None) -> Tensor:
        raise NotImplementedError


@register_advantage("group_mean")
@dataclass(frozen=True)
class GroupMean(Advantage):
    """A = R − mean of R over the sequence's group (the default everywhere)."""

    baseline_from_group = True

    def compute(self, rewards, group, **extras):
        sums, counts = group_stats(rewards, group)
        return rewards - sums / counts


@register_advantage("grpo")
@dataclass(frozen=True)
class GRPO(Advantage):
    """A = (R − group mean) / (group std + eps), std unbiased (n − 1) (Shao et al. 2024)."""

    baseline_from_group = True

    eps: float = 1e-6  # added to the std, > 0

    def __post_init__(self):
        check_range("eps", self.eps, low=0.0, low_open=True)

    def compute(self, rewards, group, **extras):
        sums, counts = group_stats(rewards, group)
        centred = rewards - sums / counts
        sq, _ = group_stats(centred.pow(2), group)
        std = torch.sqrt(sq / (counts - 1).clamp(min=1))
        return centred / (std + self.eps)


@register_advantage("rloo")
@dataclass(frozen=True)
class RLOO(Advantage):
    """Leave-one-out: A_i = R_i − mean_{j≠i, same group} R_j (Ahmadian et al. 2024)."""

    baseline_from_group = True

    def compute(self, rewards, group, **extras):
        sums, counts = group_stats(rewards, group)
        loo = (sums - rewards) / (counts - 1).clamp(min=1)
        return torch.where(counts > 1, rewards - loo, torch.zeros_like(rewards))


@register_advantage("dr_grpo")
@dataclass(frozen=True)
class DrGRPO(GroupMean):
    """Dr. GRPO: A = R − group mean, no std scaling; pair with aggregation='seq-mean-token-sum-norm'.

    The same baseline as ``group_mean`` (one implementation), under the name the paper and the
    reference code use (Liu et al. 2025, "Understanding R1-Zero-like training")."""


@register_advantage("confidence")
@dataclass(frozen=True)
class Confidence(Advantage):
    """Label-free baseline b(x) = Σ_a π(a|x)², the probability that two draws agree (single-step envs)."""

    per_context = True

    needs = ("probs",)

    def compute(self, rewards, group, probs=None, **extras):
        if probs is None:
            raise ValueError("confidence needs probs (the policy's action distribution, shape [*P, B, K]); got None")
        check_tensor("probs", probs, dtype="float")
        if tuple(probs.shape[:-1]) != tuple(rewards.shape):
            raise ValueError(f"probs must have shape {tuple(rewards.shape)} + [K], got {tuple(probs.shape)}")
        return rewards - probs.detach().pow(2).sum(-1)


@register_advantage("constant")
@dataclass(frozen=True)
class Constant(Advantage):
    """A = R − b with a fixed baseline b."""

    per_context = True

    b: float = 0.0  # the baseline

    def __post_init__(self):
        check_range("b", self.b)

    def compute(self, rewards, group, **extras):
        return rewards - self.b


@register_advantage("min_variance")
@dataclass(frozen=True)
class MinVariance(Advantage):
    """VCPO's minimum-variance baseline: per group b* = Σ W_i R_i / Σ W_i with
    W_i = ρ_i²·‖∇log π(τ_i)‖² (``weights='grad_norm'``) or W_i = ρ_i² (``weights='rho2'``)."""

    baseline_from_group = True

    weights: str = "grad_norm"  # 'grad_norm' | 'rho2'

    @property
    def needs(self) -> tuple[str, ...]:  # the cheap ρ² form needs no gradient norms
        return ("rho", "grad_sq_norms") if self.weights == "grad_norm" else ("rho",)

    def __post_init__(self):
        check_choice("weights", self.weights, ("grad_norm", "rho2"))

    def compute(self, rewards, group, rho=None, grad_sq_norms=None, **extras):
        if rho is not None:
            _check_weights("rho", rho, rewards)
        w = torch.ones_like(rewards) if rho is None else rho.detach().pow(2)
        if self.weights == "grad_norm":
            if grad_sq_norms is None:
                raise ValueError(
                    "min_variance with weights='grad_norm' needs grad_sq_norms (per-sample ‖∇log π(τ)‖², "
                    "see per_sample_grad_sq_norms); pass it or use weights='rho2'"
                )
            _check_weights("grad_sq_norms", grad_sq_norms, rewards)
            w = w * grad_sq_norms.detach()
        sums, totals = group_stats(rewards, group, weights=w)
        _, counts = group_stats(rewards, group)
        baseline = sums / totals.clamp(min=torch.finfo(rewards.dtype).tiny)
        return torch.where(counts > 1, rewards - baseline, torch.zeros_like(rewards))


@register_advantage("maxrl")
@dataclass(frozen=True)
class MaxRL(Advantage):
    """MaxRL (Tajwar et al. 2026, arXiv 2602.02710): A = (R − r̄)/r̄ with r̄ the group mean reward,
    0 for a group with r̄ = 0. With binary rewards the REINFORCE update is then the mean of ∇log π
    over the successes, an unbiased estimate of ∇log p(success) (the maximum-likelihood gradient);
    rewards must be ≥ 0 (r̄ estimates a success probability)."""

    baseline_from_group = True

    def compute(self, rewards, group, **extras):
        if on_host(rewards) and bool((rewards < 0).any()):
            raise ValueError("rewards must be >= 0 for maxrl (the group mean estimates a success probability)")
        sums, counts = group_stats(rewards, group)
        mean = sums / counts
        return torch.where(mean > 0, (rewards - mean) / mean.clamp(min=torch.finfo(rewards.dtype).tiny), 0.0)


@register_advantage("reinforce_pp")
@dataclass(frozen=True)
class ReinforcePP(Advantage):
    """REINFORCE++ (Hu et al. 2025, arXiv 2501.03262): A = (R − b − mean)/(std + eps) whitened over
    the batch's valid *tokens* as OpenRLHF does (A broadcast to each valid token; mean and population
    std over all of them, per population member), i.e. each sequence weighted by its length; b = 0,
    or the group mean with ``group_baseline=True`` (REINFORCE++-baseline). Without a mask, or with
    equal lengths, this is whitening over sequences. The paper's per-token KL to a reference policy,
    folded into the reward, is not modelled here.

    Source read: OpenRLHF/OpenRLHF at commit 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
    ``openrlhf/trainer/ppo_utils/experience_maker.py`` (estimators ``reinforce`` and
    ``reinforce_baseline``: ``mean = Σ A·m / Σ m``, ``var = Σ (A − mean)²·m / Σ m``,
    ``A ← (A − mean)·rsqrt(clamp(var, 1e-8))`` over every experience's action mask). We add ``eps``
    to the std instead of flooring the variance at 1e-8 (a relative difference of order eps/std).
    verl's ``compute_reinforce_plus_plus_*_advantage`` also whitens over tokens but with the unbiased
    variance (× N/(N − 1), N the number of valid tokens)."""

    needs = ("mask",)

    @property
    def baseline_from_group(self) -> bool:
        return self.group_baseline

    group_baseline: bool = False  # subtract the group mean before whitening
    eps: float = 1e-6  # added to the batch std, > 0

    def __post_init__(self):
        if not isinstance(self.group_baseline, bool):
            raise ValueError(f"group_baseline must be a bool, got {type(self.group_baseline).__name__}")
        check_range("eps", self.eps, low=0.0, low_open=True)

    def compute(self, rewards, group, mask=None, **extras):
        if self.group_baseline:
            sums, counts = group_stats(rewards, group)
            rewards = rewards - sums / counts
        if mask is None:
            lengths = torch.ones_like(rewards)
        else:
            check_tensor("mask", mask, dtype="bool")
            if tuple(mask.shape[:-1]) != tuple(rewards.shape):
                raise ValueError(f"mask must have shape {tuple(rewards.shape)} + [T] (one row per reward), "
                                 f"got {tuple(mask.shape)}")
            lengths = mask.sum(-1).to(rewards.dtype)  # tokens that carry each sequence's advantage
        n = lengths.sum(-1, keepdim=True)
        safe_n = n.clamp(min=1.0)
        mean = (lengths * rewards).sum(-1, keepdim=True) / safe_n
        centred = rewards - mean
        std = (lengths * centred.pow(2)).sum(-1, keepdim=True).div(safe_n).sqrt()
        return torch.where(n > 0, centred / (std + self.eps), torch.zeros_like(rewards))


def _check_weights(name: str, x: Tensor, rewards: Tensor) -> None:
    """A ratio or squared norm: float, finite, ≥ 0, one per reward."""
    check_tensor(name, x, dtype="float")
    check_shape(name, x, rewards.shape, "rewards")
    if on_host(x) and bool((x < 0).any()):
        raise ValueError(f"{name} must be ≥ 0 everywhere, got a minimum of {float(x.min()):.3g}")


def compute_advantages(advantage: Advantage, rewards: Tensor, group: Tensor | None, task: str,
                       **providers: Callable[[], Tensor]) -> Tensor:
    """A = advantage(rewards, group, **inputs), each input the advantage ``needs`` produced by the
    task's provider of that name (called only when needed). A need the task has no provider for
    raises a ``ValueError`` naming the task and the baselines that need no extras."""
    inputs = {}
    for need in advantage.needs:
        if need not in providers:
            raise ValueError(f"advantage {advantage.name!r} needs {need!r}, which task {task!r} cannot provide "
                             f"(it provides {sorted(providers) or 'nothing'}); use group_mean, grpo, rloo, "
                             "dr_grpo, maxrl, reinforce_pp or constant" + (", or min_variance(weights='rho2')" if "rho" in providers else ""))
        inputs[need] = providers[need]()
    return advantage(rewards, group, **inputs)


def per_sample_grad_sq_norms(
    model: nn.Module,
    sequence_logp: Callable[..., Tensor],
    *batch: Tensor,
) -> Float[Tensor, " B"]:
    """‖∇_θ log π(τ_i)‖² for every sample i, by ``torch.func.vmap(torch.func.grad(...))``.

    ``sequence_logp(call, *sample)`` returns the scalar log-probability of one sample, where
    ``call(*inputs)`` runs the model with the parameters being differentiated and each tensor of
    ``sample`` has its batch axis (size 1) kept.
    """
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = dict(model.named_buffers())

    def one(p: dict[str, Tensor], *sample: Tensor) -> Tensor:
        def call(*inputs: Tensor) -> Tensor:
            return torch.func.functional_call(model, (p, buffers), inputs)

        return sequence_logp(call, *(s.unsqueeze(0) for s in sample)).sum()

    grads = torch.func.vmap(torch.func.grad(one), in_dims=(None, *([0] * len(batch))))(params, *batch)
    return sum(g.pow(2).flatten(1).sum(1) for g in grads.values())
