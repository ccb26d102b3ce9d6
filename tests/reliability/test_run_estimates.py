"""Issue 46 item 5 for the ``regime`` and ``hf_text`` tasks: a run's time (and ``hf_text``'s memory)
estimated from the sizes alone, before any work, and a run beyond the machine refused in one line
naming the field and the estimate, as for the other tasks (tests/reliability/test_second_battery.py)."""

from __future__ import annotations

import json
import re
import time

import pytest
import torch

from sandbox.policies.hf.model import lm_sizes, tiny_causal_lm, tiny_config
from sandbox.runtime.config import RunConfig
from sandbox.tasks import make_task
from sandbox.tasks.base import run_seconds

#: SmolLM2-135M-Instruct's config.json as its converted checkpoint holds it (sandbox.policies.hf.pretrained)
SMOLLM2 = {"model_type": "llama", "hidden_size": 576, "vocab_size": 49152, "num_hidden_layers": 30,
           "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536,
           "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True}


def refusal(task: str, steps: int, **kwargs) -> str:
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        RunConfig(task=task, task_kwargs=kwargs, steps=steps)
    assert time.perf_counter() - start < 30  # before any work: no model built, no warm start trained
    return str(err.value)


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("tied", [False, True])
def test_the_parameter_count_from_the_config_is_the_built_models(arch, tied):
    pytest.importorskip("transformers")
    model = tiny_causal_lm(23, hidden=48, layers=3, heads=4, arch=arch, tie_embeddings=tied)
    params, layer, head = lm_sizes(tiny_config(23, 48, 3, 4, arch, tied))
    assert params == sum(p.numel() for p in model.parameters())
    matrices = [p for name, p in model.named_parameters() if name.startswith("model.layers.0.") and p.ndim == 2]
    assert layer == sum(p.numel() for p in matrices) and head == 23 * 48


def test_hf_text_counts_the_parameters_its_model_trains():
    pytest.importorskip("transformers")
    for kwargs in ({}, {"train_layers": 1}, {"arch": "llama", "tie_embeddings": True, "train_layers": 2}):
        task = make_task("hf_text", **kwargs)
        params, trained = task.sizes()[:2]
        held = task.init_params(torch.Generator().manual_seed(0))
        assert trained == sum(p.numel() for p in held), kwargs
        assert params == sum(p.numel() for p in task.policy.lm.model.parameters()), kwargs
        assert task.memory() == (4 * trained, 0)


def test_hf_text_beyond_the_time_limit_is_one_line_naming_the_field_and_the_estimate():
    """It used to fall back to the 0.1 ms/step bound (``work()`` 0): a pretrained model's run was
    judged as a bandit's."""
    assert refusal("hf_text", 10**10) == (
        "steps 10000000000 of task 'hf_text' would take at least 516 h (steps × max(0.0001 s, 7.43e+07 FLOP per "
        "step / 2e+11 FLOP/s per core)), more than $SANDBOX_MAX_RUN_HOURS = 168 h; use fewer steps or smaller sizes")
    RunConfig(task="hf_text", steps=10**9)  # 52 h at least: within


def test_a_checkpoints_config_sizes_the_run(tmp_path, monkeypatch):
    """A local checkpoint (``path``) or a converted pretrained model is sized by its config.json:
    SmolLM2-135M's 134.5M parameters, 6 FLOP per weight and token over 64 rows of ≥ 2 tokens."""
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    task = make_task("hf_text", path=str(tmp_path))
    params, trained, forward, backward, weights = task.sizes()
    assert params == trained == 134_515_008  # docs/scale-out.md: 134.5M
    assert forward == backward == weights == 30 * (576 * (576 + 2 * 192 + 576) + 3 * 576 * 1536) + 49152 * 576
    assert task.work() == 64 * (2 + 2 * 6) * forward
    message = refusal("hf_text", 10**7, path=str(tmp_path))
    assert re.fullmatch(r"steps 10000000 of task 'hf_text' would take at least [\d,]+ h \(steps × max\(0\.0001 s, "
                        r"1\.2e\+11 FLOP per step / 2e\+11 FLOP/s per core\)\), more than \$SANDBOX_MAX_RUN_HOURS = "
                        r"168 h; use fewer steps or smaller sizes", message), message
    monkeypatch.setenv("SANDBOX_MODELS", str(tmp_path / "models"))  # a pretrained model not converted here
    (tmp_path / "models" / "smollm2-135m").mkdir(parents=True)
    (tmp_path / "models" / "smollm2-135m" / "config.json").write_text(json.dumps(SMOLLM2))
    try:
        converted = make_task("hf_text", model="smollm2-135m")
    except ValueError as err:  # its package is not installed here
        pytest.skip(str(err))
    assert converted.sizes()[0] == 134_515_008
    assert make_task("hf_text", model="smollm2-135m", train_layers=2).memory() == (4 * (2 * 3_540_096 + 576), 0)


def test_a_policy_the_task_cannot_size_keeps_the_step_bound(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # no sizes: the estimate falls back, it does not fail
    task = make_task("hf_text", path=str(tmp_path))
    assert task.sizes() is None and task.work() == 0.0 and task.memory() == (0, 0)


def test_regime_beyond_the_time_limit_is_one_line_naming_the_field_and_the_estimate():
    """The regime task's transformer (its RL steps; the cached SFT warm start is left out): at T = 21 its
    rows are P + T = 8 + 21 = 29 tokens (5.21e+09 FLOP at the T = 16 of the second round: ×29/22)."""
    assert refusal("regime", 10**9) == (
        "steps 1000000000 of task 'regime' would take at least 4,776 h (steps × max(0.0001 s, 6.88e+09 FLOP per "
        "step / 2e+11 FLOP/s per core)), more than $SANDBOX_MAX_RUN_HOURS = 168 h; use fewer steps or smaller sizes")


def test_the_estimate_is_a_lower_bound_of_a_measured_hf_text_step():
    pytest.importorskip("transformers")
    from sandbox.runtime.loop import train

    config = RunConfig(task="hf_text", task_kwargs={"prompts_per_step": 4, "samples_per_prompt": 2}, steps=3,
                       log_points=1)
    train(RunConfig(task="hf_text", task_kwargs={"prompts_per_step": 1, "samples_per_prompt": 2}, steps=1,
                    log_points=1))  # transformers imported and warm: its first import is not a step
    start = time.perf_counter()
    train(config)
    assert (time.perf_counter() - start) / 3 > run_seconds(make_task("hf_text", prompts_per_step=4,
                                                                     samples_per_prompt=2), 1)
