"""Scale knobs of the sequence problems: long answers and a large vocabulary, as wrappers of any
problem (``at_scale``), so that the mechanisms that need LLM sizes can act in the toy.

* **Length** — ``Thinking(inner, think)`` puts ``think`` free tokens before ``inner``'s answer: the
  policy samples A = think + A_inner tokens and the reward (and every correct or wrong answer)
  reads the last A_inner. An LLM's reasoning answer is hundreds or thousands of tokens of which the
  reward reads a few, and a sequence log-ratio Σ_t (log π − log μ) sums a sampler–learner mismatch
  over every one of them (Precision-RL, arXiv 2510.26788, Fig. 5: about −1 nat per 1,000 tokens in
  bf16); a 10-token answer never shows such ratios. Injected answers think with token 0.
* **Vocabulary** — ``Aliased(inner, vocab)`` lets a model of ``vocab`` tokens answer a problem over
  ``inner.vocab`` = K tokens: token a means a mod K (K surface forms of each answer, as an LLM has
  many spellings of one). A random policy still answers each position right with probability
  1/K, so the group baseline has something to learn from at V ≥ 1k (an exact-match reward over
  1,024 tokens would start at 1/1,024), while the policy keeps a long tail of low-probability
  tokens and its entropy (over the aliases of an answer) — where a precision mismatch concentrates
  (Li et al., arXiv 2512.23087: the log-probability mismatch bound scales as 1 − p). Prompts and
  injected answers use the K base tokens.

``at_scale(env, vocab, think)`` is ``env`` itself, bit for bit, when neither knob is set.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_int
from sandbox.envs.sequences.base import SequenceEnv


@dataclass(frozen=True)
class _Wrapped(SequenceEnv):
    """A problem that delegates to ``inner`` (its reward scale, prompts, error)."""

    inner: SequenceEnv | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.inner, SequenceEnv):
            raise ValueError(f"inner must be a SequenceEnv, got {type(self.inner).__name__}")

    @property
    def signed_reward(self) -> bool:  # type: ignore[override]
        return self.inner.signed_reward

    @property
    def uniform_prompts(self) -> bool:  # type: ignore[override]
        return self.inner.uniform_prompts and self.vocab == self.inner.vocab

    @property
    def unique_answer(self) -> bool:  # type: ignore[override]
        return self.inner.unique_answer

    @property
    def prompt_len(self) -> int:
        return self.inner.prompt_len

    @property
    def answer_len(self) -> int:
        return self.inner.answer_len

    def sample_prompts(self, population, n, generator):
        return self.inner.sample_prompts(population, n, generator)

    def correct_answers(self, prompts):
        return self.inner.correct_answers(prompts)

    def wrong_answers(self, prompts, kind):
        return self.inner.wrong_answers(prompts, kind)

    def rewards(self, prompts, answers):
        return self.inner.rewards(prompts, answers)

    def fully_correct(self, prompts, answers):
        return self.inner.fully_correct(prompts, answers)

    def error(self, rewards):
        return self.inner.error(rewards)


@dataclass(frozen=True)
class Thinking(_Wrapped):
    """``inner``'s problem with ``think`` ≥ 1 free tokens before its answer (module docstring)."""

    think: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("think", self.think, low=1)
        if self.vocab != self.inner.vocab:
            raise ValueError(f"vocab must equal the inner problem's ({self.inner.vocab}), got {self.vocab}")

    @property
    def unique_answer(self) -> bool:  # type: ignore[override]
        return False  # any thinking goes

    @property
    def answer_len(self) -> int:
        return self.think + self.inner.answer_len

    def _pad(self, answers: Tensor) -> Tensor:
        """Token 0 at the thinking positions before an inner answer ``[..., A_inner]``."""
        return torch.cat([answers.new_zeros((*answers.shape[:-1], self.think)), answers], -1)

    def correct_answers(self, prompts):
        return self._pad(self.inner.correct_answers(prompts))

    def wrong_answers(self, prompts, kind):
        return self._pad(self.inner.wrong_answers(prompts, kind))

    def rewards(self, prompts, answers):
        return self.inner.rewards(prompts, answers[..., self.think:])

    def fully_correct(self, prompts, answers):
        return self.inner.fully_correct(prompts, answers[..., self.think:])


@dataclass(frozen=True)
class Aliased(_Wrapped):
    """``inner``'s problem over K = ``inner.vocab`` tokens answered by a model of ``vocab`` > K
    tokens: token a means a mod K (module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vocab <= self.inner.vocab:
            raise ValueError(f"vocab must exceed the problem's {self.inner.vocab} tokens, got {self.vocab}")

    @property
    def unique_answer(self) -> bool:  # type: ignore[override]
        return False  # each answer has its aliases

    def rewards(self, prompts, answers):
        return self.inner.rewards(prompts, answers % self.inner.vocab)

    def fully_correct(self, prompts, answers):
        return self.inner.fully_correct(prompts, answers % self.inner.vocab)


def at_scale(env: SequenceEnv, vocab: int | None = None, think: int = 0) -> SequenceEnv:
    """``env`` answered by a model of ``vocab`` tokens (None or ``env.vocab``: its own) after
    ``think`` ≥ 0 free tokens; ``env`` itself when neither knob is set."""
    check_int("think", think, low=0)
    if vocab is not None and vocab != env.vocab:
        check_int("vocab", vocab, low=env.vocab + 1)
        env = Aliased(vocab=vocab, inner=env)
    return Thinking(vocab=env.vocab, inner=env, think=think) if think else env


__all__ = ["Aliased", "Thinking", "at_scale"]
