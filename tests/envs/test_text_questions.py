"""The text environments' questions (the chat form of a problem) and the 'last integer' verifier."""

from __future__ import annotations

import pytest
import torch

from sandbox.envs.text import make_text_env


def test_every_problem_carries_its_question():
    g = torch.Generator().manual_seed(0)
    add = make_text_env("arithmetic", digits=1, op="+").sample(3, g)
    assert all(p.question == f"What is {p.prompt[0]} + {p.prompt[2]}? Answer with the number only." for p in add)
    mod = make_text_env("arithmetic", op="*", modulo=7).sample(1, g)[0]
    assert "mod 7" in mod.question
    rev = make_text_env("reverse", length=3, alphabet="abc").sample(1, g)[0]
    assert rev.question == f"Reverse the letters {' '.join(rev.prompt[:3])}. Answer with the letters only, no spaces."
    copy = make_text_env("reverse", length=2, mode="copy").sample(1, g)[0]
    assert copy.question == f"Repeat exactly: {copy.prompt[:2]}"
    bits = make_text_env("parity", length=4).sample(1, g)[0]
    assert bits.prompt[:4] in bits.question and bits.question.endswith("Answer 0 for even, 1 for odd.")


def test_the_last_integer_verifier():
    last = make_text_env("arithmetic", extract="last", format_reward=0.25)
    whole = make_text_env("arithmetic", format_reward=0.25)
    assert last.score("3 + 4 = 7", "7") == 1.0 and whole.score("3 + 4 = 7", "7") == 0.0
    assert last.score("7", "7") == whole.score("7", "7") == 1.0
    assert last.score("7 is not 8", "7") == 0.25  # the last integer is read, not the first
    assert last.score("no number here", "7") == 0.0
    assert last.score("it is -3.", "-3") == 1.0
    with pytest.raises(ValueError, match="extract"):
        make_text_env("arithmetic", extract="first")
