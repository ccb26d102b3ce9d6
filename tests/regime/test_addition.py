"""The matched regime's problem: multi-digit addition as a scratchpad then EOS (sandbox.envs.sequences.arithmetic)."""

import pytest
import torch

from sandbox.envs.sequences.arithmetic import (
    DIGIT0,
    EOS,
    EQUALS,
    PAD,
    PLUS,
    SEP,
    Addition,
    answer_length,
    confusions,
    max_digits_for,
)
from sandbox.envs.sequences.base import eos_mask, first_eos


def tokens(text: str) -> list[int]:
    """'12+5=' → token ids (digits, + = ; and $ for EOS, _ for PAD)."""
    special = {"_": PAD, "$": EOS, "+": PLUS, "=": EQUALS, ";": SEP}
    return [special[c] if c in special else DIGIT0 + int(c) for c in text]


def test_prompt_and_scratchpad_by_hand():
    env = Addition(vocab=64, answer_len=16)  # N = 2 digits, P = 6
    prompt = torch.tensor([[tokens("_7+48=")]])
    # columns: (7, 8, carry 0, sum 5), (0, 4, carry 1, sum 5); then ; 55 and EOS
    want = tokens("7805" + "0415" + ";55$") + [PAD] * 4
    assert env.correct_answers(prompt).tolist() == [[want]]
    prompt = torch.tensor([[tokens("99+99=")]])
    want = tokens("9908" + "9919" + ";198$") + [PAD] * 3
    assert env.correct_answers(prompt).tolist() == [[want]]


def test_sampled_prompts_are_sums_the_scratchpad_gets_right():
    env = Addition(vocab=1024, answer_len=64)
    prompts = env.sample_prompts(2, 200, torch.Generator().manual_seed(0))
    assert prompts.shape == (2, 200, env.prompt_len) and env.digits == 12
    answers = env.correct_answers(prompts)
    for row_p, row_a in zip(prompts.reshape(-1, env.prompt_len).tolist(), answers.reshape(-1, 64).tolist()):
        N = env.digits
        a = int("".join(str(t - DIGIT0) for t in row_p[:N] if t != PAD))
        b = int("".join(str(t - DIGIT0) for t in row_p[N + 1 : 2 * N + 1] if t != PAD))
        end = row_a.index(EOS)
        final = row_a[row_a.index(SEP) + 1 : end]
        assert int("".join(str(t - DIGIT0) for t in final)) == a + b
        assert len(str(a)) == len(str(b))  # both operands have n digits
        assert end + 1 <= answer_length(len(str(a)))
    n = (prompts[..., : env.digits] != PAD).sum(-1)
    assert set(n.unique().tolist()) == set(range(1, 13))  # every difficulty appears
    assert len({tuple(r) for r in prompts.reshape(-1, env.prompt_len).tolist()}) > 380  # distinct but for a few 1-digit repeats


def test_reward_reads_the_final_answer_and_truncation():
    env = Addition(vocab=64, answer_len=16, truncation_reward=-0.5)
    prompt = torch.tensor([[tokens("_7+48=")]]).expand(1, 5, -1)
    answers = torch.tensor([[
        tokens("7805" + "0415" + ";55$") + [PAD] * 4,  # right
        tokens(";55$") + [PAD] * 12,  # no scratchpad, right final answer: graded right
        tokens("7805" + "0415" + ";56$") + [PAD] * 4,  # wrong digit
        tokens("7805" + "0415" + ";555$") + [PAD] * 3,  # too long
        tokens("7805" + "0415" + ";55") + [DIGIT0] * 5,  # no EOS in T: truncated
    ]])
    assert env.rewards(prompt, answers).tolist() == [[1.0, 1.0, 0.0, 0.0, -0.5]]
    assert env.fully_correct(prompt, answers).tolist() == [[True, False, False, False, False]]
    assert env.truncated(answers).tolist() == [[False, False, False, False, True]]
    assert env.reward_range == (-0.5, 1.0)


def test_wrong_answers():
    env = Addition(vocab=64, answer_len=16)
    prompt = torch.tensor([[tokens("_7+48=")]])
    assert env.rewards(prompt, env.wrong_answers(prompt, "shifted")).tolist() == [[0.0]]
    assert env.wrong_answers(prompt, "shifted")[0, 0, 8:11].tolist() == tokens(";66")
    assert env.rewards(prompt, env.wrong_answers(prompt, "constant")).tolist() == [[0.0]]  # all PAD: truncated


def test_eos_mask():
    answers = torch.tensor([[5, 1, 0, 1], [5, 6, 7, 8], [1, 0, 0, 0]])
    assert first_eos(answers, 1).tolist() == [1, 4, 0]
    assert eos_mask(answers, 1).tolist() == [[True, True, False, False], [True] * 4, [True, False, False, False]]


@pytest.mark.parametrize("kwargs, match", [
    ({"answer_len": 7}, "answer_len"), ({"vocab": 10}, "vocab"), ({"max_digits": 13}, "max_digits"),
    ({"min_digits": 13}, "min_digits"), ({"truncation_reward": 0.5}, "truncation_reward"),
])
def test_bad_knobs_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Addition(**{"vocab": 1024, "answer_len": 64, **kwargs})


def test_lengths():
    assert [max_digits_for(T) for T in (16, 64, 256)] == [2, 12, 50]
    assert all(answer_length(max_digits_for(T)) <= T for T in range(8, 300))


def test_answer_lengths_and_prompt_counts_the_docs_state():
    """docs/regime.md: 818,200 distinct prompts and answers of 7–18 tokens at T = 21 (7–28 at T = 32)."""
    for T, lengths in ((21, (7, 18)), (32, (7, 28))):
        env = Addition(vocab=1024, answer_len=T)
        answers = env.correct_answers(env.sample_prompts(1, 5000, torch.Generator().manual_seed(0)))
        end = eos_mask(answers, EOS).sum(-1)
        assert (int(end.min()), int(end.max())) == lengths
    assert sum((10 if n == 1 else 9 * 10 ** (n - 1)) ** 2 for n in (1, 2, 3)) == 818_200


def test_slipped_answers_by_hand_and_their_rate():
    env = Addition(vocab=64, answer_len=16)
    prompt = torch.tensor([[tokens("_7+48=")]])
    right = env.correct_answers(prompt)
    assert torch.equal(env.slipped_answers(prompt, 0.0, torch.Generator().manual_seed(0)), right)
    # rate → 1: both sum digits change, in the scratchpad and, the same, in the final answer
    slipped = env.slipped_answers(prompt, 1.0 - 1e-12, torch.Generator().manual_seed(0))[0, 0].tolist()
    s0, s1 = slipped[3] - DIGIT0, slipped[7] - DIGIT0
    assert s0 != 5 and s1 != 5
    assert slipped == tokens(f"780{s0}041{s1};{s1}{s0}$") + [PAD] * 4  # carries and operands untouched
    assert env.rewards(prompt, torch.tensor([[slipped]])).item() == 0.0
    # 99 + 99 = 198: the leading 1 is the carry, never slipped
    slipped = env.slipped_answers(torch.tensor([[tokens("99+99=")]]), 1.0 - 1e-12, torch.Generator().manual_seed(1))[0, 0]
    assert slipped[9].item() == DIGIT0 + 1 and slipped[12].item() == EOS
    # a slip-free trace is right: the pass rate of an n-digit prompt is (1 − rate)^n
    env = Addition(vocab=64, answer_len=16)
    g = torch.Generator().manual_seed(2)
    prompts = env.sample_prompts(1, 20_000, g)
    reward = env.rewards(prompts, env.slipped_answers(prompts, 0.3, g))[0]
    n = env.operands(prompts)[2][0]
    for digits in (1, 2):
        rate, count = reward[n == digits].mean().item(), int((n == digits).sum())
        assert abs(rate - 0.7**digits) < 4 * (0.25 / count) ** 0.5
    with pytest.raises(ValueError, match="rate"):
        env.slipped_answers(prompts, 1.5, g)


def test_systematic_slips_follow_the_fixed_table_by_hand():
    """``spread`` > 0: each column (a_i, b_i, c_i) slips at rate + spread·(2u − 1) to its own wrong digit."""
    env = Addition(vocab=64, answer_len=16)
    u, wrong = confusions()
    assert u.shape == wrong.shape == (10, 10, 2) and int(wrong.min()) >= 1 and int(wrong.max()) <= 9
    assert torch.equal(confusions()[0], u)  # fixed: the same table for every run
    prompt = torch.tensor([[tokens("_7+48=")]])  # columns (7, 8, c 0) → 5 and (0, 4, c 1) → 5
    # rate → 1 (clipped to 0.99): both columns slip on these draws, each to its own fixed wrong digit
    slipped = env.slipped_answers(prompt, 1.0 - 1e-12, torch.Generator().manual_seed(0), spread=1e-9)[0, 0].tolist()
    s0, s1 = (5 + int(wrong[7, 8, 0])) % 10, (5 + int(wrong[0, 4, 1])) % 10
    assert slipped == tokens(f"780{s0}041{s1};{s1}{s0}$") + [PAD] * 4
    # the rate of each context: a prompt of 1 digit passes with 1 − clip(rate + spread·(2u − 1))
    prompts = torch.tensor([[tokens("_3+_4=")] * 20_000])
    reward = env.rewards(prompts, env.slipped_answers(prompts, 0.5, torch.Generator().manual_seed(3), spread=0.4))[0]
    want = 1 - min(max(0.5 + 0.4 * (2 * float(u[3, 4, 0]) - 1), 0.0), 0.99)
    assert abs(reward.mean().item() - want) < 4 * (0.25 / 20_000) ** 0.5
    # spread 0 is the uniform slips, draw for draw
    prompts = env.sample_prompts(1, 500, torch.Generator().manual_seed(4))
    assert torch.equal(env.slipped_answers(prompts, 0.3, torch.Generator().manual_seed(5)),
                       env.slipped_answers(prompts, 0.3, torch.Generator().manual_seed(5), spread=0.0))
    with pytest.raises(ValueError, match="spread"):
        env.slipped_answers(prompts, 0.3, torch.Generator().manual_seed(5), spread=1.5)
