"""Scale knobs of the sequence tasks (sandbox.envs.sequences.scale): thinking tokens before the
answer (length) and a model vocabulary larger than the problem's (aliases)."""

import pytest
import torch

from sandbox.envs.sequences import ReverseCopy
from sandbox.envs.sequences.scale import Aliased, Thinking, at_scale
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.tasks import make_task

TINY = dict(width=16, heads=2, layers=1, mlp=32, prompts_per_step=2, samples_per_prompt=2, eval_prompts=3,
            eval_samples=2)


def test_no_knob_is_the_problem_itself():
    env = ReverseCopy(vocab=2, H=3)
    assert at_scale(env) is env and at_scale(env, 2, 0) is env


def test_thinking_reads_the_last_answer_tokens_by_hand():
    env = Thinking(vocab=2, inner=ReverseCopy(vocab=2, H=3), think=2)
    assert (env.prompt_len, env.answer_len) == (3, 5)
    prompts = torch.tensor([[1, 0, 0]])
    assert env.correct_answers(prompts).tolist() == [[0, 0, 0, 0, 1]]  # thinking 0 0, then the reversal 0 0 1
    answers = torch.tensor([[1, 1, 0, 0, 1], [0, 0, 0, 1, 1], [1, 0, 1, 0, 1]])
    # to_first_error: correct prefix of the last 3 tokens / 3 (thinking ignored)
    assert env.rewards(prompts.expand(3, 3), answers).tolist() == pytest.approx([1.0, 1 / 3, 0.0])
    assert env.fully_correct(prompts.expand(3, 3), answers).tolist() == [True, False, False]
    assert env.wrong_answers(prompts, "constant").tolist() == [[0, 0, 0, 0, 0]]
    assert not env.unique_answer and env.reward_range == (0.0, 1.0)


def test_aliases_answer_modulo_the_problem_vocabulary_by_hand():
    env = Aliased(vocab=7, inner=ReverseCopy(vocab=2, H=2))
    prompts = torch.tensor([[1, 0]])
    assert env.correct_answers(prompts).tolist() == [[0, 1]]
    answers = torch.tensor([[0, 1], [2, 5], [4, 6], [1, 1]])  # 2 ≡ 0, 5 ≡ 1, 6 ≡ 0 (mod 2)
    assert env.rewards(prompts.expand(4, 2), answers).tolist() == pytest.approx([1.0, 1.0, 0.5, 0.0])
    assert not env.uniform_prompts  # prompts use the 2 base tokens, not the model's 7


def test_wrappers_validate_their_knobs():
    with pytest.raises(ValueError, match="think must"):
        Thinking(vocab=2, inner=ReverseCopy(vocab=2), think=0)
    with pytest.raises(ValueError, match="vocab must exceed the problem's 2 tokens"):
        Aliased(vocab=2, inner=ReverseCopy(vocab=2))
    with pytest.raises(ValueError, match="inner must be a SequenceEnv"):
        Thinking(vocab=2, inner=None, think=1)


def test_task_knobs_compose_and_validate():
    task = make_task("reverse_copy", H=2, think=6, V=1024, problem_V=2, **TINY)
    assert (task.prompt_len, task.answer_len, task.vocab) == (2, 8, 1024)
    assert task.model.vocab == 1024 and task.model.context == 10
    assert make_task("bit_parity", V=1024, problem_V=2, **TINY).vocab == 1024  # bit_parity's binary problem
    with pytest.raises(ValueError, match=r"problem_V must be 0 \(the model's V\) or in \[2, V\) = \[2, 2\), got 3"):
        make_task("reverse_copy", problem_V=3)
    with pytest.raises(ValueError, match=r"think must lie in \[0, inf\], got -1"):
        make_task("reverse_copy", think=-1)
    with pytest.raises(ValueError, match="seq_error=True needs one correct answer"):
        make_task("reverse_copy", think=2, seq_error=True)


def test_a_scaled_task_trains_and_its_rewards_ignore_thinking():
    cfg = RunConfig(task="reverse_copy", task_kwargs=dict(H=2, think=5, V=64, problem_V=2, **TINY), estimator="tis",
                    steps=2, log_points=2, seed=0, frictions=(("landmine", {"p_bug": 0.5}),))
    frame = train(cfg)
    assert frame["error"].notna().all() and set(frame["step"]) == {0, 1, 2}
    task = make_task("reverse_copy", H=2, think=5, V=64, problem_V=2, **TINY)
    prompts = torch.tensor([[[1, 0]]])
    answers = torch.tensor([[[63, 17, 5, 2, 9, 0, 1]]])  # thinking anything, then 0 1 (≡ the reversal)
    assert task.rewards(prompts, answers).item() == 1.0
