"""``addition``: multi-digit addition answered as a scratchpad, then EOS — the matched regime's
problem (docs/regime.md): many distinct prompts, a spread of difficulty, variable-length answers
that end in EOS, and a truncation channel.

Why this problem. RL on LLMs trains on verifiable problems whose answers are a chain of reasoning
tokens ended by EOS, read by a verifier at the end; a policy that has not saturated keeps failing
the hard prompts and passing the easy ones, so groups keep non-zero advantages. Addition with a
column scratchpad has each of these traits at a size a CPU trains: a prompt of n-digit operands,
n drawn uniformly in ``[min_digits, max_digits]`` (≈ 10^(2n) distinct prompts at each n: ≥ 1,000
from n = 2 on), an answer of 5n + 2 or 5n + 3 tokens whose every column must be right, and a
difficulty that grows with n and with the number of carries.

Tokens (``vocab`` ≥ ``FIRST_FREE``; the rest of the vocabulary is never used by the problem, so a
policy keeps a low-probability tail over it): 0 ``PAD``, 1 ``EOS``, 2–11 the digits 0–9,
12 ``+``, 13 ``=``, 14 ``;``.

    prompt  (P = 2N + 2, N = max_digits):  a (right-aligned, PAD-filled) + b (the same) =
    answer  (≤ T = answer_len tokens):     a₀ b₀ c₀ s₀  a₁ b₁ c₁ s₁ … ; d_k … d₀ EOS

column i (least significant first) restates the two digits, the carry in c_i ∈ {0, 1} and the sum
digit s_i = (a_i + b_i + c_i) mod 10; after ``;`` the sum a + b is written most significant digit
first without a leading zero. Reward: 1 if the segment between the last ``;`` before the first EOS
and that EOS is the sum's digits, else 0 (the scratchpad is not graded, as a verifier reads only
the final answer); an answer without EOS in T tokens is **truncated** and gets ``truncation_reward``
(0 as the frameworks do; a negative value is an overlong penalty).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.validation import check_int, check_range
from sandbox.envs.sequences.base import SequenceEnv, eos_mask, first_eos

PAD, EOS, DIGIT0, PLUS, EQUALS, SEP = 0, 1, 2, 12, 13, 14
FIRST_FREE = 15  # the first token the problem never uses


#: the seed of the fixed table of systematic confusions (``confusions``)
CONFUSION_SEED = 0xADD


def confusions() -> tuple[Tensor, Tensor]:
    """The problem's fixed confusions, ``[10, 10, 2]`` over a column's (a_i, b_i, c_i): a uniform u
    (its slip rate's place in the spread) and the offset 1–9 of its wrong digit — drawn once from
    ``CONFUSION_SEED``, a property of the problem (as a pretrained model's confusions are of its
    weights), the same for every run and seed."""
    g = torch.Generator().manual_seed(CONFUSION_SEED)
    return torch.rand(10, 10, 2, generator=g, dtype=torch.float64), torch.randint(1, 10, (10, 10, 2), generator=g)


def answer_length(digits: int) -> int:
    """Longest scratchpad answer to n-digit operands, EOS included: 4n + 1 + (n + 1) + 1."""
    return 5 * digits + 3


def max_digits_for(answer_len: int) -> int:
    """The most digits whose longest answer fits ``answer_len`` tokens."""
    return (answer_len - 3) // 5


@dataclass(frozen=True)
class Addition(SequenceEnv):
    """Addition of two operands of n ∈ [``min_digits``, ``max_digits``] digits (module docstring),
    answered in at most ``answer_len`` = T tokens."""

    answer_len: int = 64  # T: the most answer tokens, EOS included (≥ 8)
    min_digits: int = 1
    max_digits: int = 0  # 0: the most that fit T, (T − 3) // 5
    truncation_reward: float = 0.0  # reward of an answer with no EOS in T tokens, in [−1, 0]

    default_vocab: ClassVar[int] = 1024
    signed_reward = False
    unique_answer = False  # the graded part is the final segment: many answers earn 1
    uniform_prompts = False
    eos: ClassVar[int | None] = EOS

    def __post_init__(self) -> None:
        check_int("answer_len", self.answer_len, low=8, high=1 << 16)
        check_int("vocab", self.vocab, low=FIRST_FREE, high=1 << 20)
        fit = max_digits_for(self.answer_len)
        check_int("max_digits", self.max_digits, low=0, high=fit)
        check_int("min_digits", self.min_digits, low=1, high=self.digits)
        check_range("truncation_reward", self.truncation_reward, low=-1.0, high=0.0)

    @property
    def digits(self) -> int:
        """N: the most digits of an operand."""
        return self.max_digits or max_digits_for(self.answer_len)

    @property
    def prompt_len(self) -> int:
        return 2 * self.digits + 2

    @property
    def reward_range(self) -> tuple[float, float]:
        return (self.truncation_reward, 1.0)

    # ------------------------------------------------------------------ prompts
    def sample_prompts(self, population, n, generator):
        """``[S, n, P]``: operands of n_i digits (uniform in [min, max]; leading digit ≠ 0 unless n_i = 1)."""
        N = self.digits
        lengths = torch.randint(self.min_digits, N + 1, (population, n, 1), generator=generator)
        digits = torch.randint(0, 10, (population, n, 2, N), generator=generator)
        lead = torch.randint(1, 10, (population, n, 2, 1), generator=generator)
        col = torch.arange(N)  # column index from the least significant digit
        digits = torch.where(col == lengths.unsqueeze(-1) - 1, torch.where(lengths.unsqueeze(-1) > 1, lead, digits), digits)
        tokens = torch.where(col < lengths.unsqueeze(-1), digits + DIGIT0, PAD).flip(-1)  # most significant first
        plus = torch.full((population, n, 1), PLUS)
        equals = torch.full((population, n, 1), EQUALS)
        return torch.cat([tokens[..., 0, :], plus, tokens[..., 1, :], equals], -1)

    def operands(self, prompts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Digits of a and b least significant first ``[..., N]`` (0 beyond their length) and n ``[...]``."""
        N = self.digits
        a, b = prompts[..., :N].flip(-1), prompts[..., N + 1 : 2 * N + 1].flip(-1)
        n = ((a != PAD) | (b != PAD)).sum(-1)
        return (a - DIGIT0).clamp(min=0), (b - DIGIT0).clamp(min=0), n

    # ------------------------------------------------------------------ answers
    def correct_answers(self, prompts):
        """The scratchpad answer of each prompt, EOS then PAD to T tokens ``[..., T]``."""
        a, b, n = self.operands(prompts)
        N, T = self.digits, self.answer_len
        carry = torch.zeros_like(a[..., 0])
        cols, sums = [], []
        for i in range(N):
            s = a[..., i] + b[..., i] + carry
            cols.append(torch.stack([a[..., i], b[..., i], carry, s % 10], -1) + DIGIT0)
            sums.append(s % 10)
            carry = s // 10
        sums.append(carry)
        sum_digits = torch.stack(sums, -1)  # [..., N + 1] least significant first
        width = n + (sum_digits.gather(-1, n.unsqueeze(-1)).squeeze(-1) > 0).long()  # digits of a + b
        rows = torch.full((*prompts.shape[:-1], T), PAD, dtype=torch.long, device=prompts.device)
        pad_cols = torch.stack(cols, -2).reshape(*prompts.shape[:-1], 4 * N)
        pos = torch.arange(T, device=prompts.device)
        scratch = pos < 4 * n.unsqueeze(-1)
        rows = torch.where(scratch, _take(pad_cols, pos), rows)
        rows = torch.where(pos == 4 * n.unsqueeze(-1), SEP, rows)
        k = pos - 4 * n.unsqueeze(-1) - 1  # index into the final answer, most significant first
        final = (k >= 0) & (k < width.unsqueeze(-1))
        digit = sum_digits.gather(-1, (width.unsqueeze(-1) - 1 - k).clamp(0, N)) + DIGIT0
        rows = torch.where(final, digit, rows)
        return torch.where(k == width.unsqueeze(-1), EOS, rows)

    def slipped_answers(self, prompts: Tensor, rate: float, generator: torch.Generator, spread: float = 0.0) -> Tensor:
        """Solution traces with slips, for a warm start that errs as an LLM does (docs/regime.md):
        each column's sum digit s_i is, with probability ``rate``, written as one of the nine other
        digits (uniformly); the final answer copies the written digits, the carries stay right. One
        slip makes the answer wrong, so a policy fit to these traces passes an n-digit prompt with
        probability ≈ (1 − rate)^n: its errors are draws, not blind spots.

        ``spread`` > 0 makes the slips *systematic* (``confusions``): the column (a_i, b_i, c_i)
        slips at rate + spread·(2u − 1) (clipped to [0, 0.99]) to its own fixed wrong digit, so where
        that rate passes ½ the fit policy prefers a wrong digit and RL must learn that column's
        correction, not only sharpen a right argmax."""
        check_range("rate", rate, low=0.0, high=1.0)
        check_range("spread", spread, low=0.0, high=1.0)
        right = self.correct_answers(prompts)
        a, b, n = self.operands(prompts)
        N, T = self.digits, right.shape[-1]
        width = first_eos(right, EOS) - 4 * n - 1  # digits of the sum
        shape = (*prompts.shape[:-1], N)
        draw = torch.rand(shape, generator=generator).to(prompts.device)
        offset = torch.randint(1, 10, shape, generator=generator).to(prompts.device)
        cols = torch.arange(N, device=prompts.device)
        if spread:
            u, wrong = (t.to(prompts.device) for t in confusions())
            carry = (right.gather(-1, (4 * cols + 2).clamp(max=T - 1).expand(shape)) - DIGIT0).clamp(0, 1)
            ctx = (a[..., :N] * 10 + b[..., :N]) * 2 + carry  # the column's (a_i, b_i, c_i)
            rates = (rate + spread * (2 * u - 1)).clamp(0.0, 0.99).flatten()
            slip, offset = draw < rates[ctx], wrong.flatten()[ctx]
        else:
            slip = draw < rate
        delta = torch.where(slip & (cols < n.unsqueeze(-1)), offset, 0)
        add = torch.zeros_like(right)
        add.scatter_(-1, (4 * cols + 3).expand(shape).clamp(max=T - 1), delta)  # the scratchpad's s_i
        final = 4 * n.unsqueeze(-1) + 1 + width.unsqueeze(-1) - 1 - cols  # s_i in the final answer
        add.scatter_add_(-1, final.clamp(0, T - 1), torch.where(final < T, delta, 0))
        return torch.where(add > 0, (right - DIGIT0 + add) % 10 + DIGIT0, right)

    def wrong_answers(self, prompts, kind):
        """'constant': all PAD (no EOS: truncated); 'shifted': the correct answer with the final
        digits + 1 mod 10 (a well-formed wrong answer)."""
        right = self.correct_answers(prompts)
        if kind == "constant":
            return torch.zeros_like(right)
        a, b, n = self.operands(prompts)
        after_sep = torch.arange(right.shape[-1], device=right.device) > 4 * n.unsqueeze(-1)
        digit = (right >= DIGIT0) & (right < DIGIT0 + 10) & after_sep
        return torch.where(digit, (right - DIGIT0 + 1) % 10 + DIGIT0, right)

    def rewards(self, prompts, answers):
        """1 if the final segment before the first EOS is the sum, 0 otherwise; truncated answers
        (no EOS) get ``truncation_reward``."""
        dtype = torch.get_default_dtype()
        right = self.correct_answers(prompts)
        e_right, e = first_eos(right, EOS), first_eos(answers, EOS)
        a, b, n = self.operands(prompts)
        width = e_right - 4 * n - 1  # digits of the sum
        T = answers.shape[-1]
        offsets = torch.arange(T, device=answers.device)
        # the last width + 1 tokens before EOS must be ';' then the sum's digits
        start = e - width - 1
        idx = (start.unsqueeze(-1) + offsets).clamp(0, T - 1)
        got = answers.gather(-1, idx)
        want = right.gather(-1, (e_right - width - 1).unsqueeze(-1).add(offsets).clamp(0, T - 1))
        in_span = offsets <= width.unsqueeze(-1)
        ok = ((got == want) | ~in_span).all(-1) & (start >= 0) & (e < T)
        reward = ok.to(dtype)
        return torch.where(e < T, reward, torch.tensor(self.truncation_reward, dtype=dtype))

    def fully_correct(self, prompts, answers):
        """Whether each answer is the whole scratchpad answer, token for token up to its EOS."""
        right = self.correct_answers(prompts)
        valid = eos_mask(right, EOS)
        return ((answers == right) | ~valid).all(-1)

    def truncated(self, answers: Tensor) -> Tensor:
        """Answers ``[..., T]`` with no EOS (bool ``[...]``)."""
        return first_eos(answers, EOS) >= answers.shape[-1]

    def error(self, rewards):
        """1 − mean R over the rewards of one member (0 is perfect)."""
        return 1 - rewards.mean(-1)


def _take(cols: Tensor, pos: Tensor) -> Tensor:
    """``cols [..., 4N]`` read at answer positions ``pos [T]`` (clamped: positions ≥ 4N read the last)."""
    return cols.gather(-1, pos.clamp(max=cols.shape[-1] - 1).expand(*cols.shape[:-1], pos.shape[0]))


__all__ = ["CONFUSION_SEED", "DIGIT0", "EOS", "EQUALS", "FIRST_FREE", "PAD", "PLUS", "SEP", "Addition", "answer_length", "confusions",
           "max_digits_for"]
