"""Actor bugs: the actor samples from something other than the learner's policy, and may report
log-probs that are wrong (shared/spec/environments.md, "Actor bugs")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_int, check_range
from sandbox.frictions.base import (
    Friction,
    Sample,
    register_friction,
    replace_rows,
)


def mixture_logp_fn(forced: Tensor, rate: float, policy_logp):
    """The per-token log-prob function of the actor that outputs ``forced`` with probability
    ``rate`` and follows ``policy_logp`` otherwise (None when ``policy_logp`` is None)."""
    if policy_logp is None:
        return None
    return lambda actions: mixture_true_logp(actions, forced.expand_as(actions), rate, policy_logp)


def mixture_true_logp(actions: Tensor, forced: Tensor, rate: float, policy_logp) -> Tensor | None:
    """True per-token log-probs under the actor that outputs ``forced`` with probability ``rate`` and
    samples its policy otherwise: the row's log-probability log(rate·1[row = forced] + (1 − rate)·Π_t π(a_t))
    is exact; per token it is log π(a_t), with the row's mixture correction on the first token.
    ``policy_logp(actions)`` gives the actor's own log-probs; None when unknown (then None)."""
    if policy_logp is None:
        return None
    tok = policy_logp(actions)
    row = tok.sum(-1)
    is_forced = (actions == forced).all(-1)
    forced_term = torch.where(is_forced, torch.full_like(row, math.log(rate)), torch.full_like(row, -math.inf))
    mix = torch.logaddexp(forced_term, math.log1p(-rate) + row) if rate < 1 else forced_term
    # a row the policy cannot produce (a truncated sampler: Π_t π = 0) carries the whole mixture on its first token
    possible = torch.isfinite(row)
    out = torch.where(possible.unsqueeze(-1), tok, torch.zeros_like(tok))
    out[..., 0] = out[..., 0] + (mix - torch.where(possible, row, torch.zeros_like(row)))
    return out


@register_friction("landmine")
@dataclass(frozen=True)
class Landmine(Friction):
    """With probability p_bug a row's answer is replaced by a fixed wrong answer and its recorded
    log-prob set to log(override_prob) (1.0 → 0); optional reward penalty N(penalty_mean, penalty_std²)
    added to *every* answer equal to the landmine, sampled or injected — as the reference's landmine
    wrapper does (google-deepmind/egg, ``egg/environments/landmine_wrapper.py``: the environment
    penalises the landmine wherever it appears, whoever produced it)."""

    replaces_rows: ClassVar[bool] = True

    strength = "p_bug"
    p_bug: float = 0.0  # strength: probability a row is overridden, in [0, 1]
    override_prob: float = 1.0  # the probability the actor reports for the forced answer, in (0, 1]
    penalty_mean: float = 0.0
    penalty_std: float = 0.0  # ≥ 0

    def __post_init__(self) -> None:
        check_range("p_bug", self.p_bug, low=0.0, high=1.0)
        check_range("override_prob", self.override_prob, low=0.0, high=1.0, low_open=True)
        check_range("penalty_mean", self.penalty_mean)
        check_range("penalty_std", self.penalty_std, low=0.0)

    @property
    def active(self) -> bool:  # a penalty acts on sampled landmines even when nothing is injected
        return self.p_bug > 0 or self.penalty_mean != 0 or self.penalty_std > 0

    def override(self, sample, ctx, generator, policy_logp=None):
        if ctx.wrong_actions is None:
            raise ValueError("landmine needs the environment's fixed wrong answer (FrictionContext.wrong_actions)")
        if self.p_bug == 0:  # a penalty alone (``reward``): nothing is injected
            return sample, torch.zeros(sample.actions.shape[:-1], dtype=torch.bool, device=sample.actions.device)
        rows = (torch.rand(sample.actions.shape[:-1], generator=generator) < self.p_bug).to(sample.actions.device)
        forced = ctx.wrong_actions.expand_as(sample.actions)
        reported = torch.zeros_like(sample.behavior_logp)
        reported[..., 0] = math.log(self.override_prob)
        out = replace_rows(sample, rows, forced, reported, sample.true_logp)
        true = mixture_true_logp(out.actions, forced, self.p_bug, policy_logp)
        return Sample(out.actions, out.behavior_logp, out.true_logp if true is None else true), rows

    def actor_logp(self, ctx, policy_logp):
        return mixture_logp_fn(ctx.wrong_actions, self.p_bug, policy_logp) if self.p_bug > 0 else policy_logp

    def reward(self, rewards, sample, ctx, generator, replaced):
        if self.penalty_mean == 0 and self.penalty_std == 0:
            return rewards
        rows = (sample.actions == ctx.wrong_actions.expand_as(sample.actions)).all(-1)  # every landmine answer
        noise = torch.randn(rows.shape, generator=generator, dtype=rewards.dtype).to(rewards.device)
        penalty = (self.penalty_mean + self.penalty_std * noise) * rows.to(rewards.dtype)
        return rewards + (penalty if rewards.ndim == rows.ndim else penalty.unsqueeze(-1))


@register_friction("logit_noise")
@dataclass(frozen=True)
class LogitNoise(Friction):
    """The sampler adds σ·z to its logits (the learner does not); z ~ N(0, 1) fixed per run
    (one value per vocabulary entry) or fresh at every call. The actor reports what it sampled from."""

    strength = "sigma"
    sigma: float = 0.0  # strength, ≥ 0
    fresh: bool = False

    def __post_init__(self) -> None:
        check_range("sigma", self.sigma, low=0.0)

    def actor_logits(self, logits, ctx, generator):
        if self.fresh:
            z = torch.randn(logits.shape, generator=generator, dtype=logits.dtype)
        else:
            z = torch.randn(logits.shape[-1], generator=derived_generator(ctx.seed, "logit_noise"), dtype=logits.dtype)
        return logits + self.sigma * z.to(logits.device)  # drawn on the CPU generator: the same draws everywhere


def fake_quantize(w: Tensor, bits: int, population_dims: int = 0) -> Tensor:
    """Symmetric per-tensor fake quantisation to ``bits`` bits: round(w/s)·s, s = max|w|/(2^{b−1} − 1);
    the maximum is per population member."""
    levels = 2 ** (bits - 1) - 1
    flat = w.reshape(*w.shape[:population_dims], -1)
    scale = flat.abs().amax(-1).clamp(min=torch.finfo(w.dtype).tiny) / levels
    scale = scale.reshape(*scale.shape, *([1] * (w.ndim - population_dims)))
    return torch.round(w / scale) * scale


@register_friction("quantized")
@dataclass(frozen=True)
class QuantizedSampler(Friction):
    """The actor's parameters are fake-quantised to ``bits`` bits (symmetric per tensor); 0 = off."""

    strength = "bits"
    bits: int = 0  # 0 (off) or 2..16
    population_dims: int = 1  # leading population axes of the parameters

    def __post_init__(self) -> None:
        check_int("bits", self.bits, low=0, high=16)
        if self.bits != 0:
            check_int("bits", self.bits, low=2, high=16)
        check_int("population_dims", self.population_dims, low=0)

    def actor_params(self, params, ctx):
        return [fake_quantize(p, self.bits, self.population_dims) for p in params]


@register_friction("eps_random")
@dataclass(frozen=True)
class EpsilonRandom(Friction):
    """With probability ε the actor draws a uniform token; it records the mixture's log-prob
    log((1 − ε)·π + ε/V)."""

    strength = "eps"
    eps: float = 0.0  # strength, in [0, 1]

    def __post_init__(self) -> None:
        check_range("eps", self.eps, low=0.0, high=1.0)

    def actor_probs(self, probs, ctx):
        return (1 - self.eps) * probs + self.eps / probs.shape[-1]


__all__ = ["EpsilonRandom", "Landmine", "LogitNoise", "QuantizedSampler", "fake_quantize"]
