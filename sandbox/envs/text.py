"""Text tasks with verifiable answers for causal LMs (shared/spec/environments.md, "LLM scale-out").

A problem is a prompt string and its answer string; the policy writes a completion after the
prompt and stops with EOS; the environment scores the decoded completion. Environments:

- ``reverse``: the synthetic token-reversal task rendered as text, ``"abb=" → "bba"`` (or forward
  copy, or +1 mod V); c = correct prefix length / H (``to_first_error``) or the fraction of matching
  positions, R = κ·c + (1 − κ)·1[completion = answer].
- ``parity``: ``"0110=" → "0"``, the even-parity bit; R = +1 if right, −1 otherwise.
- ``arithmetic``: ``"12+7=" → "19"`` (optionally mod m); R = 1 if the completion parses as an
  integer equal to the answer, ``format_reward`` if it parses but is wrong, 0 otherwise.

``CharTokenizer`` is a character-level tokenizer built in code (no downloads): id 0 = ``<pad>``,
id 1 = ``<eos>``, then one id per character. The tasks that train a transformers causal LM on these
environments (``text_reverse``, ``text_parity``, ``text_arithmetic``) are ``hf_text`` with the
environment fixed (``sandbox.tasks.hf_text.HFTextTask``).
"""

from __future__ import annotations

import re
import string
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.registry import Registry
from sandbox.core.tokens import REPLACEMENT
from sandbox.core.validation import check_choice, check_int, check_range

PAD, EOS = "<pad>", "<eos>"
#: digits, operators, letters
DEFAULT_CHARS = string.digits + "+-*=" + string.ascii_lowercase


# ----------------------------------------------------------------------------- tokenizer
class CharTokenizer:
    """One token per character: ``[<pad>, <eos>, *chars]``.

    ``encode`` maps a string to ids (an unknown character raises ``ValueError``); ``decode`` stops
    at the first EOS and drops pads, so ``decode(encode(s)) == s``.
    """

    pad_id = 0
    eos_id = 1

    def __init__(self, chars: str = DEFAULT_CHARS) -> None:
        if not isinstance(chars, str) or not chars:
            raise ValueError(f"chars must be a non-empty string of distinct characters, got {chars!r}")
        if len(set(chars)) != len(chars):
            dup = sorted({c for c in chars if chars.count(c) > 1})
            raise ValueError(f"chars must be distinct characters, got duplicates {dup}")
        self.chars = chars
        self.tokens = [PAD, EOS, *chars]
        self._ids = {c: i + 2 for i, c in enumerate(chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self._ids))
        if unknown:
            raise ValueError(f"text contains characters {unknown} outside the tokenizer's chars {self.chars!r}")
        return [self._ids[c] for c in text]

    def decode(self, ids: Sequence[int] | Tensor, errors: str = "strict") -> str:
        """Text of ``ids`` up to the first EOS, pads dropped. An id outside the vocabulary (a model
        whose vocabulary is larger than the tokenizer's can sample one) raises with
        ``errors='strict'`` and becomes U+FFFD (never a correct character) with ``'replace'``."""
        check_choice("errors", errors, ("strict", "replace"))
        out = []
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            if i == self.eos_id:
                break
            if i == self.pad_id:
                continue
            if not 0 <= i < self.vocab_size:
                if errors == "strict":
                    raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
                out.append(REPLACEMENT)
                continue
            out.append(self.tokens[i])
        return "".join(out)

    def __repr__(self) -> str:
        return f"CharTokenizer(chars={self.chars!r})"


def encode_batch(tokenizer, texts: Sequence[str], *, side: str = "left",
                 length: int | None = None, append_eos: bool = False) -> tuple[Tensor, Tensor]:
    """Token ids ``[B, L]`` (long) and a validity mask ``[B, L]`` (bool), padded with
    ``tokenizer.pad_id`` on the ``side`` ('left' for prompts, 'right' for answers). ``length`` pads
    (or truncates on the right) to a fixed length; ``append_eos`` ends every text with EOS."""
    check_choice("side", side, ("left", "right"))
    rows = [list(tokenizer.encode(t)) + ([tokenizer.eos_id] if append_eos else []) for t in texts]
    width = max((len(r) for r in rows), default=0) if length is None else int(length)
    ids = torch.full((len(rows), width), tokenizer.pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        row = row[:width]
        if not row:
            continue
        sl = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, sl] = torch.tensor(row, dtype=torch.long)
        mask[i, sl] = True
    return ids, mask


# ----------------------------------------------------------------------------- environments
TEXT_ENVS: Registry[TextEnv] = Registry("text environment")


def register_text_env(name: str, *, replace: bool = False):
    return TEXT_ENVS.register(name, replace=replace)


def make_text_env(name: str, **kwargs) -> TextEnv:
    """``make_text_env("arithmetic", digits=1, modulo=10)``; unknown names or fields raise ``ValueError``."""
    return TEXT_ENVS.make(name, **kwargs)


@dataclass(frozen=True)
class Problem:
    """``prompt`` (what a character-level model continues), ``answer``, and ``question``: the same
    problem in words, the user's turn for a chat model (``hf_text`` with ``chat=True``)."""

    prompt: str
    answer: str
    question: str = ""


@dataclass(frozen=True)
class TextEnv(ABC):
    """A source of (prompt, answer) problems and a reward on decoded completions."""

    name: ClassVar[str] = "text"
    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    @property
    @abstractmethod
    def chars(self) -> str:
        """Every character that prompts and answers use (the default tokenizer's vocabulary)."""

    @property
    @abstractmethod
    def max_answer_chars(self) -> int:
        """The longest answer (the default generation budget is this + 1 for EOS)."""

    @abstractmethod
    def sample(self, n: int, generator: torch.Generator) -> list[Problem]:
        """``n`` problems drawn with ``generator``."""

    @abstractmethod
    def score(self, completion: str, answer: str) -> float:
        """Reward of a decoded completion against the answer."""

    @abstractmethod
    def wrong_answer(self, problem: Problem) -> str:
        """A fixed wrong answer of the same length (the landmine bug's forced output)."""

    def scores(self, completions: Sequence[str], answers: Sequence[str]) -> Tensor:
        return torch.tensor([self.score(c, a) for c, a in zip(completions, answers)], dtype=torch.float32)


def _draw(n: int, size: int, k: int, generator: torch.Generator) -> list[list[int]]:
    return torch.randint(0, k, (n, size), generator=generator).tolist()


@register_text_env("reverse")
@dataclass(frozen=True)
class ReverseText(TextEnv):
    """``"abb=" → "bba"``: reverse (or ``copy``, or ``increment`` each character by 1 mod V) a
    random string of ``length`` characters over ``alphabet``."""

    length: int = 3  # H, ≥ 1
    alphabet: str = "ab"  # V distinct lowercase letters or digits
    mode: str = "reverse"  # 'reverse' | 'copy' | 'increment'
    scoring: str = "to_first_error"  # 'to_first_error' | 'positions'
    kappa: float = 1.0  # R = κ·c + (1 − κ)·1[all correct], in [0, 1]

    def __post_init__(self) -> None:
        check_int("length", self.length, low=1)
        if (not isinstance(self.alphabet, str) or len(self.alphabet) < 2 or len(set(self.alphabet)) != len(self.alphabet)
                or not set(self.alphabet) <= set(string.ascii_lowercase + string.digits)):
            raise ValueError(f"alphabet must be ≥ 2 distinct lowercase letters or digits, got {self.alphabet!r}")
        check_choice("mode", self.mode, ("reverse", "copy", "increment"))
        check_choice("scoring", self.scoring, ("to_first_error", "positions"))
        check_range("kappa", self.kappa, low=0.0, high=1.0)

    @property
    def chars(self) -> str:
        return self.alphabet + "="

    @property
    def max_answer_chars(self) -> int:
        return self.length

    def target(self, text: str) -> str:
        if self.mode == "reverse":
            return text[::-1]
        if self.mode == "copy":
            return text
        V = len(self.alphabet)
        return "".join(self.alphabet[(self.alphabet.index(c) + 1) % V] for c in text)

    def sample(self, n, generator):
        rows = _draw(n, self.length, len(self.alphabet), generator)
        texts = ["".join(self.alphabet[i] for i in row) for row in rows]
        return [Problem(t + "=", self.target(t), self.question(t)) for t in texts]

    def question(self, text: str) -> str:
        if self.mode == "reverse":
            return f"Reverse the letters {' '.join(text)}. Answer with the letters only, no spaces."
        if self.mode == "copy":
            return f"Repeat exactly: {text}"
        return (f"Replace each letter of {text} by the one after it in {self.alphabet} (the last by the first). "
                "Answer with the letters only.")

    def score(self, completion, answer):
        H = len(answer)
        hits = [i < len(completion) and completion[i] == answer[i] for i in range(H)]
        if self.scoring == "positions":
            c = sum(hits) / H
        else:
            c = (hits.index(False) if False in hits else H) / H
        return self.kappa * c + (1 - self.kappa) * float(completion == answer)

    def wrong_answer(self, problem):
        a = problem.answer
        return self.alphabet[(self.alphabet.index(a[0]) + 1) % len(self.alphabet)] + a[1:]


@register_text_env("parity")
@dataclass(frozen=True)
class ParityText(TextEnv):
    """``"0110=" → "0"``: the even-parity bit of ``length`` random bits; R = +1 if right, else −1."""

    reward_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    length: int = 4  # number of bits, ≥ 1

    def __post_init__(self) -> None:
        check_int("length", self.length, low=1)

    @property
    def chars(self) -> str:
        return "01="

    @property
    def max_answer_chars(self) -> int:
        return 1

    def sample(self, n, generator):
        rows = _draw(n, self.length, 2, generator)
        return [Problem("".join(map(str, r)) + "=", str(sum(r) % 2),
                        f"Is the number of 1s in {''.join(map(str, r))} even or odd? Answer 0 for even, 1 for odd.")
                for r in rows]

    def score(self, completion, answer):
        return 1.0 if completion == answer else -1.0

    def wrong_answer(self, problem):
        return "1" if problem.answer == "0" else "0"


_INTEGER = re.compile(r"-?\d+")


@register_text_env("arithmetic")
@dataclass(frozen=True)
class Arithmetic(TextEnv):
    """``"12+7=" → "19"``: a op b with a, b uniform in [0, 10^digits); the answer is
    (a op b) mod ``modulo`` when ``modulo`` > 0. R = 1 if the completion parses as an integer equal
    to the answer, ``format_reward`` if it parses but is wrong, 0 otherwise. ``extract='last'``
    reads the last integer anywhere in the completion instead (the usual verifier for a chat model,
    which writes "3 + 4 = 7"): R = 1 if it is the answer, ``format_reward`` if another, 0 if none."""

    digits: int = 1  # operand digits, in [1, 6]
    op: str = "+"  # '+' | '-' | '*'
    modulo: int = 0  # 0 = exact answer; m ≥ 2 = answer mod m
    format_reward: float = 0.0  # partial credit for a well-formed wrong answer, in [0, 1)
    extract: str = "whole"  # 'whole': the completion is the integer | 'last': its last integer

    def __post_init__(self) -> None:
        check_int("digits", self.digits, low=1, high=6)
        check_choice("op", self.op, ("+", "-", "*"))
        check_int("modulo", self.modulo, low=0)
        if self.modulo != 0:
            check_int("modulo", self.modulo, low=2)
        check_range("format_reward", self.format_reward, low=0.0, high=1.0, high_open=True)
        check_choice("extract", self.extract, ("whole", "last"))

    @property
    def chars(self) -> str:
        return string.digits + "+-*="

    @property
    def max_answer_chars(self) -> int:
        if self.modulo:
            return len(str(self.modulo - 1))
        top = 10**self.digits - 1
        return {"+": len(str(2 * top)), "-": len(str(top)) + 1, "*": len(str(top * top))}[self.op]

    def answer(self, a: int, b: int) -> int:
        value = a + b if self.op == "+" else a - b if self.op == "-" else a * b
        return value % self.modulo if self.modulo else value

    def sample(self, n, generator):
        ab = torch.randint(0, 10**self.digits, (n, 2), generator=generator).tolist()
        return [Problem(f"{a}{self.op}{b}=", str(self.answer(a, b)), self.question(a, b)) for a, b in ab]

    def question(self, a: int, b: int) -> str:
        expression = f"{a} {self.op} {b}" if not self.modulo else f"({a} {self.op} {b}) mod {self.modulo}"
        return f"What is {expression}? Answer with the number only."

    def score(self, completion, answer):
        if self.extract == "last":
            found = _INTEGER.findall(completion)
            completion = found[-1] if found else ""
        if not _INTEGER.fullmatch(completion):
            return 0.0
        return 1.0 if int(completion) == int(answer) else self.format_reward

    def wrong_answer(self, problem):
        value = int(problem.answer) + 1
        if self.modulo:
            value %= self.modulo
        text = str(value)
        return text if len(text) == len(problem.answer) else str(int(problem.answer) - 1)


__all__ = ["DEFAULT_CHARS", "TEXT_ENVS", "Arithmetic", "CharTokenizer", "ParityText", "Problem", "ReverseText",
           "TextEnv", "encode_batch",
           "make_text_env", "register_text_env"]
