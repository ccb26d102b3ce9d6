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

from sandbox.core.sampling import SamplingChain, draw
from sandbox.core.validation import check_range
from sandbox.frictions.base import Friction, register_friction


@register_friction("partial_rollouts")
@dataclass(frozen=True)
class PartialRollouts(Friction):
    """A row's answer is sampled in ``chunks`` chunks, each with a newer policy version (1 = off).
    Needs a sequence task (a transformer with teacher-forced ``answer_logits``) and the simulated
    loop's parameter history (``history='params'``)."""

    resumes_versions: ClassVar[bool] = True

    chunks: int = 1  # strength: number of chunks (≤ versions) per answer, ≥ 1; 1 = off

    def __post_init__(self) -> None:
        check_range("chunks", self.chunks, low=1)

    @property
    def active(self) -> bool:
        return self.chunks > 1

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
        """Draw the batch's answers chunk by chunk (one uniform per token, drawn first, inverse CDF
        through ``chain`` as the task's own sampler does); returns the tokens and their log-probs
        ``[S, B, A]``, ``logp_of(answers)`` (as the task's ``PolicySample``) and the version of every
        token ``[S, B, A]``."""
        model = getattr(task, "model", None)
        if not hasattr(model, "answer_logits") or not hasattr(task, "answer_len"):
            raise ValueError(f"partial_rollouts needs a sequence task (a transformer policy with answer_logits), "
                             f"got {type(task).__name__}")
        prompts, A = batch.obs, task.answer_len
        versions = self.chunk_versions(started, latest)
        chunk = self.chunk_of(A)
        params = {v: params_of(v) for v in sorted(set(versions))}
        S, G, _ = prompts.shape
        B = G * task.samples_per_prompt
        dtype = params[versions[0]][0].dtype
        uniforms = torch.rand(S, B, A, generator=generator, dtype=dtype)
        actions = torch.zeros(S, B, A, dtype=torch.long)
        logp = torch.empty(S, B, A, dtype=dtype)
        for t in range(A):  # teacher-forced: position t's logits see only actions[..., :t]
            logits = model.answer_logits(params[versions[int(chunk[t])]], prompts, actions)[:, :, t]
            log_probs, probs = chain.distribution(logits)
            actions[..., t] = draw(probs, uniforms[..., t : t + 1])
            logp[..., t] = log_probs.gather(-1, actions[..., t : t + 1]).squeeze(-1)
        drawn = actions.clone()

        def logp_of(answers: Tensor) -> Tensor:
            """Per-token log-probs of ``answers`` under the chunked actor (each token its version's)."""
            out = logp.clone()
            same = (answers == drawn).all(-1, keepdim=True)
            if bool(same.all()):
                return out
            for v, p in params.items():
                at = torch.tensor(versions)[chunk] == v  # the positions sampled with version v
                if bool(at.any()):
                    forced = chain.logp(model.answer_logits(p, prompts, answers), answers)
                    out[..., at] = torch.where(same, out[..., at], forced[..., at])
            return out

        stamp = torch.tensor(versions, dtype=torch.long)[chunk].expand(S, B, A).clone()
        return actions, logp, logp_of, stamp


__all__ = ["PartialRollouts"]
