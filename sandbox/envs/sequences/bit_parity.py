"""``bit_parity``: V = 2, prompt H bits, answer 1 token; +1 for the even-parity bit Σx mod 2, else −1."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from sandbox.core.validation import check_int
from sandbox.envs.sequences.base import SEQUENCE_ENVS, SequenceEnv


def parity_labels(prompts: Tensor) -> Tensor:
    """The even-parity bit Σ x mod 2 of each prompt ``[..., H]`` → ``[...]``."""
    return prompts.sum(-1) % 2


@SEQUENCE_ENVS.register("bit_parity")
@dataclass(frozen=True)
class BitParity(SequenceEnv):
    H: int = 10  # prompt length

    def __post_init__(self) -> None:
        check_int("H", self.H, low=1)
        if self.vocab != 2:
            raise ValueError(f"bit_parity has a binary vocabulary: V must be 2 (or 0), got {self.vocab}")

    @property
    def prompt_len(self) -> int:
        return self.H

    @property
    def answer_len(self) -> int:
        return 1

    def correct_answers(self, prompts):
        return parity_labels(prompts).unsqueeze(-1)
