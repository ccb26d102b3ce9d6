"""Text environments: the character tokenizer, problems, and rewards on hand-built strings."""

from __future__ import annotations

import pytest
import torch

from sandbox.envs.text import (
    DEFAULT_CHARS,
    Arithmetic,
    CharTokenizer,
    Problem,
    encode_batch,
    make_text_env,
)
from sandbox.tasks import make_task


# ----------------------------------------------------------------------------- tokenizer
def test_tokenizer_round_trip_and_special_ids():
    tok = CharTokenizer()
    assert tok.vocab_size == 2 + len(DEFAULT_CHARS) == 42
    assert (tok.pad_id, tok.eos_id) == (0, 1)
    for text in ["", "0", "12+7=", "abc=cba", DEFAULT_CHARS, "9*9=81"]:
        ids = tok.encode(text)
        assert len(ids) == len(text) and all(2 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text
    assert tok.encode("0+a") == [2, 12, 16]  # digits first, then + - * =, then letters


def test_decode_stops_at_eos_and_skips_pads():
    tok = CharTokenizer("ab=")
    a, b, eq = tok.encode("ab=")
    assert tok.decode([a, tok.pad_id, b, tok.eos_id, a, a]) == "ab"
    assert tok.decode(torch.tensor([tok.eos_id, a])) == ""
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([7])


def test_tokenizer_rejects_bad_input():
    with pytest.raises(ValueError, match="outside the tokenizer's chars"):
        CharTokenizer("ab").encode("abc")
    with pytest.raises(ValueError, match="distinct"):
        CharTokenizer("aba")
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer("")


def test_encode_batch_pads_left_and_right():
    tok = CharTokenizer("abc=")
    ids, mask = encode_batch(tok, ["ab=", "c="], side="left")
    assert ids.tolist() == [[2, 3, 5], [0, 4, 5]] and mask.tolist() == [[True] * 3, [False, True, True]]
    ids, mask = encode_batch(tok, ["ab", "c"], side="right", length=4, append_eos=True)
    assert ids.tolist() == [[2, 3, 1, 0], [4, 1, 0, 0]]
    assert mask.tolist() == [[True, True, True, False], [True, True, False, False]]
    ids, _ = encode_batch(tok, ["abc"], side="right", length=2, append_eos=True)  # truncated on the right
    assert ids.tolist() == [[2, 3]]
    with pytest.raises(ValueError, match="side"):
        encode_batch(tok, ["a"], side="middle")


# ----------------------------------------------------------------------------- rewards
def test_arithmetic_rewards_on_hand_built_strings():
    env = Arithmetic(digits=2)
    assert env.score("19", "19") == 1.0
    assert env.score("019", "19") == 1.0  # parses as 19
    assert env.score("18", "19") == 0.0
    assert env.score("", "19") == 0.0 and env.score("1+9", "19") == 0.0 and env.score("-", "19") == 0.0
    partial = Arithmetic(op="-", format_reward=0.25)
    assert partial.score("-3", "-3") == 1.0 and partial.score("3", "-3") == 0.25 and partial.score("3-", "-3") == 0.0
    mod = Arithmetic(modulo=10)
    assert mod.answer(7, 8) == 5 and mod.max_answer_chars == 1
    assert Arithmetic(digits=2).max_answer_chars == 3 and Arithmetic(op="*").max_answer_chars == 2
    assert Arithmetic(op="-").max_answer_chars == 2  # "-9"


def test_reverse_rewards_on_hand_built_strings():
    env = make_text_env("reverse", length=4, alphabet="abc")
    assert env.score("dcba", "dcba") == 1.0
    assert env.score("abca", "abcb") == 0.75  # correct prefix of 3 out of 4
    assert env.score("bbcb", "abcb") == 0.0  # first error at position 0
    assert env.score("ab", "abcb") == 0.5  # short completion: missing positions are errors
    assert env.score("abcbaa", "abcb") == 1.0  # κ = 1: trailing characters are not scored
    positions = make_text_env("reverse", length=4, scoring="positions", kappa=0.5)
    assert positions.score("bbcb", "abcb") == 0.5 * 0.75
    assert positions.score("abcb", "abcb") == 1.0
    assert positions.score("abcbaa", "abcb") == 0.5  # all positions right, but not the exact answer
    assert make_text_env("reverse", mode="copy").target("abb") == "abb"
    assert make_text_env("reverse", mode="increment", alphabet="abc").target("abc") == "bca"


def test_parity_rewards():
    env = make_text_env("parity", length=3)
    assert env.reward_range == (-1.0, 1.0)
    assert env.score("0", "0") == 1.0 and env.score("1", "0") == -1.0 and env.score("", "0") == -1.0


def test_problems_are_correct_deterministic_and_tokenizable():
    gen = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    for name, kwargs in [("arithmetic", {"digits": 2}), ("arithmetic", {"op": "*", "modulo": 7}),
                         ("reverse", {"length": 5, "alphabet": "xyz"}), ("parity", {"length": 6})]:
        env = make_text_env(name, **kwargs)
        problems = env.sample(50, gen())
        assert problems == env.sample(50, gen())
        assert problems != env.sample(50, torch.Generator().manual_seed(4))
        tok = CharTokenizer(env.chars)
        for p in problems:
            tok.encode(p.prompt + p.answer)
            assert env.score(p.answer, p.answer) == env.reward_range[1]
            wrong = env.wrong_answer(p)
            assert len(wrong) == len(p.answer) and env.score(wrong, p.answer) < env.reward_range[1]
            assert len(p.answer) <= env.max_answer_chars
            body = p.prompt[:-1]
            if name == "arithmetic":
                a, b = body.split(kwargs.get("op", "+"))
                value = eval(f"{int(a)}{kwargs.get('op', '+')}{int(b)}")  # noqa: S307 (digits and one operator)
                assert int(p.answer) == (value % kwargs["modulo"] if "modulo" in kwargs else value)
            elif name == "reverse":
                assert p.answer == body[::-1]
            else:
                assert p.answer == str(body.count("1") % 2)


def test_env_errors_name_the_argument():
    with pytest.raises(ValueError, match="unknown text environment 'sorting'"):
        make_text_env("sorting")
    with pytest.raises(ValueError, match="alphabet"):
        make_text_env("reverse", alphabet="a")
    with pytest.raises(ValueError, match="digits"):
        make_text_env("arithmetic", digits=0)
    with pytest.raises(ValueError, match="op"):
        make_text_env("arithmetic", op="/")
    with pytest.raises(ValueError, match="modulo"):
        make_text_env("arithmetic", modulo=1)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        make_text_env("parity", alphabet="ab")
    assert Problem("1+1=", "2").answer == "2"


def test_text_tasks_are_registered_with_their_environment():
    task = make_task("text_reverse", env_kwargs={"length": 2})
    assert task.env == "reverse" and task.text_env.length == 2 and task.new_tokens == 3
    assert make_task("text_arithmetic").text_env.name == "arithmetic"
    assert make_task("text_parity").n_actions == 5  # pad, eos, 0, 1, =
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        make_task("text_reverse", env="arithmetic")
    with pytest.raises(ValueError, match="unknown text environment"):
        make_task("hf_text", env="sorting")
