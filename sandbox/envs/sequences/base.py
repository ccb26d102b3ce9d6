"""The sequence-task environment contract: prompts, correct and wrong answers, rewards and the
error, for one problem (shared/spec/environments.md, "Synthetic transformer sequence tasks").

A sequence is the plain concatenation [prompt ; answer] (fixed lengths, no special tokens). Rewards
are in [0, 1] (reverse_copy) or ±1 (the others); the error maps them so that 0 is perfect.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.registry import Registry

SEQUENCE_ENVS: Registry[SequenceEnv] = Registry("sequence problem")
WRONG_ANSWERS = ("shifted", "constant")


def all_sequences(length: int, vocab: int) -> Tensor:
    """Every sequence of ``length`` tokens over ``vocab``, ``[vocab^length, length]`` (lexicographic)."""
    digits = torch.arange(vocab ** length).unsqueeze(-1) // vocab ** torch.arange(length - 1, -1, -1)
    return digits % vocab


def first_eos(answers: Tensor, eos: int) -> Tensor:
    """Position of the first ``eos`` of each row ``[..., T]`` → ``[...]`` (T where there is none)."""
    T = answers.shape[-1]
    pos = torch.arange(T, device=answers.device).expand(answers.shape)
    return torch.where(answers == eos, pos, T).amin(-1)


def eos_mask(answers: Tensor, eos: int) -> Tensor:
    """Valid tokens of answers ``[..., T]``: every position up to and including the first ``eos``."""
    return torch.arange(answers.shape[-1], device=answers.device) <= first_eos(answers, eos).unsqueeze(-1)


def signed(correct: Tensor) -> Tensor:
    """+1 where correct, −1 elsewhere."""
    return correct.to(torch.get_default_dtype()) * 2 - 1


@dataclass(frozen=True)
class SequenceEnv(ABC):
    """One sequence problem over a vocabulary of ``vocab`` tokens."""

    vocab: int

    #: the vocabulary when the task's V is 0
    default_vocab: ClassVar[int] = 2
    #: rewards in [0, 1] (False) or ±1 (True)
    signed_reward: ClassVar[bool] = True
    #: prompts are uniform over V^P, so the exact evaluation may enumerate them
    uniform_prompts: ClassVar[bool] = True
    #: each prompt has one correct answer (``correct_answers``), so the sequence error is 1 − E π(y*|x)
    unique_answer: ClassVar[bool] = True
    #: the token that ends an answer (None: answers have exactly ``answer_len`` tokens); the policy
    #: stops there, later positions are padding outside the token mask
    eos: ClassVar[int | None] = None

    @property
    @abstractmethod
    def prompt_len(self) -> int: ...

    @property
    @abstractmethod
    def answer_len(self) -> int: ...

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-1.0, 1.0) if self.signed_reward else (0.0, 1.0)

    def sample_prompts(self, population: int, n: int, generator: torch.Generator) -> Tensor:
        """``[S, n, P]`` prompts from the problem's full distribution (default: uniform tokens)."""
        return torch.randint(0, self.vocab, (population, n, self.prompt_len), generator=generator)

    @abstractmethod
    def correct_answers(self, prompts: Tensor) -> Tensor:
        """A correct answer ``[..., A]`` per prompt ``[..., P]``."""

    def wrong_answers(self, prompts: Tensor, kind: str) -> Tensor:
        """The landmine's fixed wrong answer. ``'constant'``: all zeros whatever the prompt (a stuck
        actor, the reference's default; correct for the rare prompts whose answer is all zeros).
        ``'shifted'``: every token of the correct answer + 1 mod V (reward = the task's minimum) —
        at V = 2 the complement, so pushing it down teaches the right answer."""
        if kind == "constant":
            return torch.zeros((*prompts.shape[:-1], self.answer_len), dtype=torch.long, device=prompts.device)
        return (self.correct_answers(prompts) + 1) % self.vocab

    def rewards(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Rewards ``[...]`` of answers ``[..., A]`` to their row prompts ``[..., P]`` (default: ±1
        on the single answer token)."""
        return signed(answers[..., 0] == self.correct_answers(prompts)[..., 0])

    def fully_correct(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Whether each answer is entirely correct (bool ``[...]``)."""
        return (answers == self.correct_answers(prompts)).all(-1)

    def error(self, rewards: Tensor) -> Tensor:
        """0 is perfect: 1 − mean R for rewards in [0, 1], (1 − mean R)/2 (the wrong fraction) for ±1."""
        mean = rewards.mean(-1)
        return (1 - mean) / 2 if self.signed_reward else 1 - mean
