"""Partial rollouts: a sequence whose generation is interrupted by weight updates and resumed with
the newer weights (AReaL's interruptible generation, slime's partial rollouts), so one sequence
holds tokens of several policy versions.

The answer's A tokens are cut into ``chunks`` = k near-equal chunks; a sequence started with
version v while the newest is t samples chunk j with version v_j = v + round(j·(t − v)/(k − 1)), so
its first chunk is v's and its last the newest. Each token is stamped with its version
(``Rollout.version [*P, B, T]``) and reported with that version's log-prob, which is what it was
sampled from (reported = true μ; what changes is that μ mixes versions within a row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.sampling import SamplingChain
from sandbox.core.validation import check_range
from sandbox.core.versions import Versions
from sandbox.frictions.base import Friction, register_friction


@register_friction("partial_rollouts")
@dataclass(frozen=True)
class PartialRollouts(Friction):
    """A row's answer is sampled in ``chunks`` chunks, each with a newer policy version (1 = off).
    Needs a task whose sampler decodes each position with any version (``Task.resumable``) and the
    simulated loop's parameter history (``history='params'``)."""

    resumes_versions: ClassVar[bool] = True

    strength, identity = "chunks", 1
    chunks: int = 1  # strength: number of chunks (≤ versions) per answer, ≥ 1; 1 = off

    def __post_init__(self) -> None:
        check_range("chunks", self.chunks, low=1)

    def chunk_versions(self, started: int, latest: int) -> list[int]:
        """v_j = v + round(j·(t − v)/(k − 1)) for j < k: from the start version to the newest."""
        check_range("latest", latest, low=started)
        k = self.chunks
        return [started + round(j * (latest - started) / (k - 1)) for j in range(k)]

    def chunk_of(self, answer_len: int) -> Tensor:
        """The chunk of each answer position ``[A]``: ⌊t·k/A⌋ (near-equal chunks, the first ones shorter)."""
        check_range("answer_len", answer_len, low=1)
        return torch.arange(answer_len) * self.chunks // answer_len

    def sample(self, task, batch, chain: SamplingChain, generator: torch.Generator, started: int, latest: int,
               params_of: Callable[[int], Sequence[Tensor]]):
        """Draw the batch's answers through the task's own decode loop, each chunk's positions
        decoded by their version; returns the tokens and their log-probs ``[S, B, A]``,
        ``logp_of(answers)`` (each token scored by its version) and the version of every token."""
        if not task.resumable:
            raise ValueError(f"partial_rollouts needs a sequence task (a policy that decodes each position with any "
                             f"version's parameters), got {type(task).__name__}")
        chunk_versions = self.chunk_versions(started, latest)
        stamps = tuple(chunk_versions[int(c)] for c in self.chunk_of(task.answer_len))
        versions = Versions(stamps, {v: params_of(v) for v in sorted(set(stamps))})
        drawn = task.sample(versions.first, batch, chain, generator, versions=versions)
        return drawn.actions, drawn.logp, drawn.logp_of, versions.stamp(drawn.actions.shape)


__all__ = ["PartialRollouts"]
