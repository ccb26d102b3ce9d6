"""``subsequence_match``: V = 5, prompt P = 2 tokens, answer A = 32 tokens; +1 if the prompt is a
(non-contiguous) subsequence of the answer, else −1."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_int
from sandbox.envs.sequences.base import SEQUENCE_ENVS, SequenceEnv, signed


def is_subsequence(prompts: Tensor, answers: Tensor) -> Tensor:
    """Whether each prompt ``[..., P]`` is a (non-contiguous) subsequence of its answer ``[..., A]``
    (greedy matching, left to right) → bool ``[...]``."""
    P = prompts.shape[-1]
    matched = torch.zeros(answers.shape[:-1], dtype=torch.long, device=answers.device)
    for t in range(answers.shape[-1]):
        nxt = prompts.gather(-1, matched.clamp(max=P - 1).unsqueeze(-1)).squeeze(-1)
        matched = matched + ((matched < P) & (answers[..., t] == nxt)).to(torch.long)
    return matched == P


@SEQUENCE_ENVS.register("subsequence_match")
@dataclass(frozen=True)
class SubsequenceMatch(SequenceEnv):
    sub_prompt: int = 2  # prompt length P
    sub_answer: int = 32  # answer length A (≥ P)

    default_vocab = 5
    uniform_prompts = False  # the exact evaluation enumerates V^(P+A): far too many
    unique_answer = False  # many answers contain the prompt

    def __post_init__(self) -> None:
        check_int("sub_prompt", self.sub_prompt, low=1)
        check_int("sub_answer", self.sub_answer, low=self.sub_prompt)

    @property
    def prompt_len(self) -> int:
        return self.sub_prompt

    @property
    def answer_len(self) -> int:
        return self.sub_answer

    def correct_answers(self, prompts):
        """The prompt, then its last token repeated."""
        pad = prompts[..., -1:].expand(*prompts.shape[:-1], self.answer_len - self.prompt_len)
        return torch.cat([prompts, pad], -1)

    def wrong_answers(self, prompts, kind):
        """'shifted': the first prompt token + 1 mod V repeated, which never contains the prompt."""
        if kind == "constant":
            return super().wrong_answers(prompts, kind)
        return ((prompts[..., :1] + 1) % self.vocab).expand(*prompts.shape[:-1], self.answer_len)

    def rewards(self, prompts, answers):
        return signed(is_subsequence(prompts, answers))

    def fully_correct(self, prompts, answers):
        return is_subsequence(prompts, answers)
