"""Reward corruption: what the learner observes is not what the actor earned."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sandbox.core.validation import check_int, check_range
from sandbox.frictions.base import Friction, register_friction


@register_friction("bernoulli_reward")
@dataclass(frozen=True)
class BernoulliReward(Friction):
    """With probability p the reward becomes the task's min or max (50/50)."""

    kind = "reward"
    strength = "p"
    p: float = 0.0  # strength, in [0, 1]

    def __post_init__(self) -> None:
        check_range("p", self.p, low=0.0, high=1.0)

    def reward(self, rewards, sample, ctx, generator, replaced):
        hit = (torch.rand(rewards.shape, generator=generator) < self.p).to(rewards.device)
        high = (torch.rand(rewards.shape, generator=generator) < 0.5).to(rewards.device)
        lo, hi = ctx.reward_range
        noisy = torch.where(high, torch.full_like(rewards, hi), torch.full_like(rewards, lo))
        return torch.where(hit, noisy, rewards)


@register_friction("gaussian_reward")
@dataclass(frozen=True)
class GaussianReward(Friction):
    """Additive reward noise σ·N(0, 1)."""

    kind = "reward"
    strength = "sigma"
    sigma: float = 0.0  # strength, ≥ 0

    def __post_init__(self) -> None:
        check_range("sigma", self.sigma, low=0.0)

    def reward(self, rewards, sample, ctx, generator, replaced):
        return rewards + self.sigma * torch.randn(rewards.shape, generator=generator, dtype=rewards.dtype).to(rewards.device)


@register_friction("label_flip")
@dataclass(frozen=True)
class LabelFlip(Friction):
    """With probability p the reward is computed against a wrong label y' ≠ y (uniform over the
    other classes): R = 1[a = y']. Single-step tasks whose reward is 1[a = y] (MNIST, bandits)."""

    kind = "reward"
    needs_label_reward = True  # only a task whose reward is 1[a = y] (``Task.label_reward``; RunConfig checks)
    strength = "p"
    p: float = 0.0  # strength, in [0, 1]

    def __post_init__(self) -> None:
        check_range("p", self.p, low=0.0, high=1.0)

    def reward(self, rewards, sample, ctx, generator, replaced):
        if ctx.correct_actions is None:
            raise ValueError("label_flip needs the correct labels (FrictionContext.correct_actions)")
        labels = ctx.correct_actions[..., 0]
        flip = (torch.rand(labels.shape, generator=generator) < self.p).to(labels.device)
        shift = torch.randint(1, ctx.n_actions, labels.shape, generator=generator).to(labels.device)
        wrong = (labels + shift) % ctx.n_actions
        flipped_reward = (sample.actions[..., 0] == wrong).to(rewards.dtype)
        return torch.where(flip, flipped_reward, rewards)


@register_friction("poison_token")
@dataclass(frozen=True)
class PoisonToken(Friction):
    """A penalty is subtracted from the reward of every row in which ``token`` appears."""

    kind = "reward"
    token: int = 0  # the poisoned token id, ≥ 0
    strength = "penalty"
    penalty: float = 0.0  # strength, ≥ 0

    def __post_init__(self) -> None:
        check_int("token", self.token, low=0)
        check_range("penalty", self.penalty, low=0.0)

    def reward(self, rewards, sample, ctx, generator, replaced):
        hit = (sample.actions == self.token).any(-1).to(rewards.dtype)
        return rewards - self.penalty * (hit if rewards.ndim == hit.ndim else hit.unsqueeze(-1))
