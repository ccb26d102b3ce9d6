"""``reverse_copy``: V = 2, prompt H tokens, answer H tokens; R = κ·c + (1 − κ)·1[all correct] with
c the correct prefix length / H (``to_first_error``) or the fraction of matching positions; the
token-reversal task of "Delightful Policy Gradient" (arXiv 2603.14608)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.envs.sequences.base import SEQUENCE_ENVS, SequenceEnv

MATCHES = ("to_first_error", "per_position")


def reversal_targets(prompts: Tensor, vocab: int, order: str = "reverse", shift: int = 0) -> Tensor:
    """The correct answer of ``reverse_copy``: the prompt reversed (or copied), plus ``shift`` mod V."""
    target = prompts.flip(-1) if order == "reverse" else prompts
    return (target + shift) % vocab


def reversal_reward(answers: Tensor, targets: Tensor, match: str = "to_first_error", kappa: float = 1.0) -> Tensor:
    """R = κ·c + (1 − κ)·1[answer = target]; c = (length of the correct prefix)/H or the fraction of
    matching positions. ``answers``, ``targets`` ``[..., H]`` → ``[...]``."""
    check_choice("match", match, MATCHES)
    correct = answers == targets
    H = correct.shape[-1]
    if match == "to_first_error":
        c = torch.cumprod(correct.to(torch.long), -1).sum(-1).to(torch.get_default_dtype()) / H
    else:
        c = correct.to(torch.get_default_dtype()).mean(-1)
    return kappa * c + (1 - kappa) * correct.all(-1).to(c.dtype)


@SEQUENCE_ENVS.register("reverse_copy")
@dataclass(frozen=True)
class ReverseCopy(SequenceEnv):
    H: int = 10  # prompt = answer length
    order: str = "reverse"  # 'reverse' | 'forward' (copy)
    shift: int = 0  # target token = (x + shift) mod V
    match: str = "to_first_error"  # 'to_first_error' | 'per_position'
    kappa: float = 1.0  # weight of the partial credit c, in [0, 1]

    signed_reward = False

    def __post_init__(self) -> None:
        check_int("H", self.H, low=1)
        check_choice("order", self.order, ("reverse", "forward"))
        check_int("shift", self.shift, low=0)
        check_choice("match", self.match, MATCHES)
        check_range("kappa", self.kappa, low=0.0, high=1.0)

    @property
    def prompt_len(self) -> int:
        return self.H

    @property
    def answer_len(self) -> int:
        return self.H

    def correct_answers(self, prompts):
        return reversal_targets(prompts, self.vocab, self.order, self.shift)

    def rewards(self, prompts, answers):
        return reversal_reward(answers, self.correct_answers(prompts), self.match, self.kappa)
