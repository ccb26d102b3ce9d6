"""The conformance suite's shared half (docs/conformance.md): identical float64 batches, random and
adversarial, and our side of every comparison — always through ``sandbox.check.map_config``, the
mapping ``sandbox check`` uses, never a second one. Nothing here imports a framework.

A batch holds the three policies of a decoupled trainer on the same sampled tokens: log π_θ (the
learner's, differentiated), log π_old (the trainer's recomputed anchor) and log μ (the engine's), a
token mask, one reward and one advantage per sequence, and the prompt (group) of each sequence.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from dataclasses import dataclass, replace

import torch

from sandbox.advantages import compute_advantages, make_advantage
from sandbox.check import Mapping, map_config
from sandbox.core.terms import PGTerms
from sandbox.estimators import make_estimator

#: loss value and d loss / d log π_θ agree to this (absolute, or relative where |value| > 1)
TOL = 1e-6
F64 = torch.float64


@dataclass(frozen=True)
class Batch:
    name: str
    logp: torch.Tensor  # log π_θ [B, T]
    old: torch.Tensor  # log π_old [B, T]
    rollout: torch.Tensor  # log μ [B, T]
    mask: torch.Tensor  # [B, T] bool
    rewards: torch.Tensor  # [B]
    advantages: torch.Tensor  # [B]
    group: torch.Tensor  # [B] long

    @property
    def token_advantages(self) -> torch.Tensor:
        """A per token, zero on masked tokens (verl's and TRL's layout)."""
        return self.advantages.unsqueeze(-1) * self.mask.to(F64)


def _logps(g: torch.Generator, shape: tuple[int, int], low: float, high: float) -> torch.Tensor:
    """Log-probabilities drawn uniformly in [−high, −low]."""
    return -(low + (high - low) * torch.rand(shape, generator=g, dtype=F64))


def _near(g: torch.Generator, base: torch.Tensor, scale: float) -> torch.Tensor:
    """``base`` moved by N(0, scale²), kept a log-probability."""
    return (base + scale * torch.randn(base.shape, generator=g, dtype=F64)).clamp(max=-1e-4)


def make_batch(name: str, seed: int = 0) -> Batch:
    """One of ``BATCHES``: 'random' (ratios near 1), 'far' (log-ratios up to ±8 and two at ±25,
    past verl's ±20 clamp), 'masked' (holes inside answers), 'unequal' (right-padded lengths 1..T),
    'equal_rewards' (one group's rewards all equal, its advantages 0), 'single_token' (T = 1) and
    'empty_row' (one answer wholly masked)."""
    g = torch.Generator().manual_seed(seed * 1000 + BATCHES.index(name))
    B, T = (8, 1) if name == "single_token" else (8, 6)
    group = torch.arange(B) // 4
    logp = _logps(g, (B, T), 0.05, 2.0)
    old, rollout = _near(g, logp, 0.15), None
    rollout = _near(g, old, 0.15)
    mask = torch.ones(B, T, dtype=torch.bool)
    rewards = torch.randn(B, generator=g, dtype=F64)
    if name == "far":
        logp, old, rollout = (_logps(g, (B, T), 0.01, 8.0) for _ in range(3))
        logp[0, 0], old[0, 0], rollout[0, 0] = -0.01, -25.0, -0.02
        logp[5, 1], old[5, 1], rollout[5, 1] = -25.0, -0.01, -24.0
    elif name == "masked":
        mask = torch.rand(B, T, generator=g) > 0.3
        mask[:, 0] = True
    elif name == "unequal":
        lengths = torch.tensor([1, 6, 2, 5, 3, 4, 6, 1])
        mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    elif name == "equal_rewards":
        rewards[:4] = 0.75
    elif name == "empty_row":
        mask[2] = False
    advantages = torch.randn(B, generator=g, dtype=F64)
    if name == "equal_rewards":
        advantages[:4] = 0.0
    return Batch(name, logp, old, rollout, mask, rewards, advantages, group)


BATCHES = ("random", "far", "masked", "unequal", "equal_rewards", "single_token", "empty_row")
#: the batches every mode must agree on (``empty_row`` is a documented TRL difference)
AGREED = BATCHES[:-1]


def with_advantages(batch: Batch, advantages: torch.Tensor) -> Batch:
    return replace(batch, advantages=advantages.detach().to(F64))


# ----------------------------------------------------------------------------- our side
def mapped(config) -> Mapping:
    """``sandbox check``'s own mapping of ``config``."""
    return map_config(config)


def our_loss(mapping: Mapping, batch: Batch, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, d loss / d log π_θ) of the mapped estimator on ``batch``: π_old is the recomputed one
    when the mapped deployment recomputes it, else μ (bypass: the estimator's default)."""
    recipe = mapping.recipe
    estimator = make_estimator(recipe.estimator, **recipe.estimator_kwargs)
    logp = batch.logp.clone().requires_grad_(True)
    terms = PGTerms(logp=logp, advantages=batch.advantages, mask=batch.mask, behavior_logp=batch.rollout,
                    proximal_logp=batch.old if mapping.deployment.proximal == "recompute" else None,
                    group=batch.group, generator=torch.Generator().manual_seed(seed))
    loss = estimator(terms).loss
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


def our_advantages(mapping: Mapping, batch: Batch) -> torch.Tensor:
    """A per sequence from the mapped advantage (the learner's call, ``compute_advantages``)."""
    recipe = mapping.recipe
    advantage = make_advantage(recipe.advantage, **recipe.advantage_kwargs)
    return compute_advantages(advantage, batch.rewards, batch.group, "conformance", mask=lambda: batch.mask)


def assert_agree(ours: tuple[torch.Tensor, torch.Tensor], theirs: tuple[torch.Tensor, torch.Tensor],
                 what: str) -> None:
    """Value and gradient within ``TOL`` (relative where the magnitude exceeds 1)."""
    for name, a, b in (("loss", *[x[0] for x in (ours, theirs)]), ("grad", *[x[1] for x in (ours, theirs)])):
        a, b = a.detach().to(F64), b.detach().to(F64)
        assert a.shape == b.shape, f"{what}: {name} shapes {tuple(a.shape)} vs {tuple(b.shape)}"
        scale = torch.clamp(b.abs(), min=1.0)
        gap = float(((a - b).abs() / scale).max())
        assert gap <= TOL, f"{what}: {name} differs by {gap:.3g} (ours {a.flatten()[:6].tolist()}, " \
                           f"theirs {b.flatten()[:6].tolist()})"


def differ(ours: tuple[torch.Tensor, torch.Tensor], theirs: tuple[torch.Tensor, torch.Tensor]) -> float:
    """The largest (scaled) gap between the two (value and gradient): a documented disagreement's size."""
    gaps = [float(((a.detach() - b.detach()).abs() / torch.clamp(b.detach().abs(), min=1.0)).max())
            for a, b in zip(ours, theirs)]
    return max(gaps)


# ----------------------------------------------------------------------------- their code, sliced
@functools.cache
def source_block(function, start: str, end: str) -> str:
    """The lines of ``function``'s own source from the line holding ``start`` up to (not including)
    the line holding ``end``, dedented: a framework's inline computation run verbatim where it has no
    function of its own (TRL computes its vLLM IS ratio and its advantages inside
    ``_generate_and_score_completions``). A marker that moved at a new pin fails here, loudly."""
    lines = inspect.getsource(function).splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i, line in enumerate(lines) if i > first and end in line)
    return textwrap.dedent("\n".join(lines[first:last]))


def run_block(code: str, namespace: dict) -> dict:
    exec(compile(code, "<framework source block>", "exec"), namespace)  # noqa: S102 - their code, verbatim
    return namespace


__all__ = ["AGREED", "BATCHES", "TOL", "Batch", "assert_agree", "differ", "make_batch", "mapped",
           "our_advantages", "our_loss", "run_block", "source_block", "with_advantages"]
