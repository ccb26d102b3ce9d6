"""Rare discovery: an actor occasionally produces the correct answer it would almost never sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from sandbox.core.validation import check_range
from sandbox.frictions.actor_bugs import mixture_logp_fn, mixture_true_logp
from sandbox.frictions.base import Friction, Sample, register_friction, replace_rows


@register_friction("rare_discovery")
@dataclass(frozen=True)
class RareDiscovery(Friction):
    """With probability p_disc a row's answer is replaced by the correct answer, recorded with
    behaviour probability 1 (log-prob 0)."""

    replaces_rows: ClassVar[bool] = True

    strength = "p_disc"
    p_disc: float = 0.0  # strength, in [0, 1]

    def __post_init__(self) -> None:
        check_range("p_disc", self.p_disc, low=0.0, high=1.0)

    def override(self, sample, ctx, generator, policy_logp=None):
        if ctx.correct_actions is None:
            raise ValueError("rare_discovery needs the correct answers (FrictionContext.correct_actions)")
        rows = (torch.rand(sample.actions.shape[:-1], generator=generator) < self.p_disc).to(sample.actions.device)
        forced = ctx.correct_actions.expand_as(sample.actions)
        out = replace_rows(sample, rows, forced, 0.0, sample.true_logp)
        true = mixture_true_logp(out.actions, forced, self.p_disc, policy_logp)
        return Sample(out.actions, out.behavior_logp, out.true_logp if true is None else true), rows

    def actor_logp(self, ctx, policy_logp):
        return mixture_logp_fn(ctx.correct_actions, self.p_disc, policy_logp)
