"""``key_value``: V = 10, prompt [k₁, v₁, …, kₙ, vₙ, q] (2n + 1 tokens, q one of the keys), answer 1
token; +1 for the value of the last key equal to q, else −1."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_int
from sandbox.envs.sequences.base import SEQUENCE_ENVS, SequenceEnv


def key_value_labels(prompts: Tensor) -> Tensor:
    """Prompt [k₁, v₁, …, kₙ, vₙ, q]: the value of the last key equal to q → ``[...]``."""
    keys, values, query = prompts[..., 0:-1:2], prompts[..., 1:-1:2], prompts[..., -1:]
    n = keys.shape[-1]
    hit = keys == query
    last = torch.where(hit, torch.arange(n, device=keys.device), torch.full_like(keys, -1)).amax(-1, keepdim=True)
    return values.gather(-1, last.clamp(min=0)).squeeze(-1)


@SEQUENCE_ENVS.register("key_value")
@dataclass(frozen=True)
class KeyValue(SequenceEnv):
    n_pairs: int = 5  # pairs in the prompt

    default_vocab = 10
    uniform_prompts = False

    def __post_init__(self) -> None:
        check_int("n_pairs", self.n_pairs, low=1)

    @property
    def prompt_len(self) -> int:
        return 2 * self.n_pairs + 1

    @property
    def answer_len(self) -> int:
        return 1

    def sample_prompts(self, population, n, generator):
        pairs = torch.randint(0, self.vocab, (population, n, self.n_pairs, 2), generator=generator)
        which = torch.randint(0, self.n_pairs, (population, n, 1), generator=generator)
        query = pairs[..., 0].gather(-1, which)
        return torch.cat([pairs.reshape(population, n, 2 * self.n_pairs), query], -1)

    def correct_answers(self, prompts):
        return key_value_labels(prompts).unsqueeze(-1)
