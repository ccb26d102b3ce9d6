"""The mapping tables of the fixtures (their key → our field → value, every row, in order), the
readers' forms (nested, dotted, Hydra overrides, JSON, the GRPOConfig object, a dict), and the
one-line refusals: an unknown loss mode, a key we do not model, an unknown key — unless --ignore."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from sandbox.check import map_config, read_config
from sandbox.check.mapping import Mapping

FIXTURES = Path(__file__).parent / "fixtures"
KL = "actor_rollout_ref.actor.use_kl_loss"
IGNORE = {"verl_grpo_token_tis.yaml": [KL]}  # a KL loss to a reference model: refused unless ignored

TABLES = {
    "trl_cispo.json": [
        ('loss_type × importance_sampling_level', 'estimator', 'cispo'),
        ('loss_type', 'cispo.eps_low', math.inf),
        ('epsilon_high', 'cispo.eps_high', 4.0),
        ('loss_type', 'cispo.aggregation', 'token-mean'),
        ('use_vllm × vllm_importance_sampling_correction × vllm_importance_sampling_mode', 'cispo.rollout_is', 'token_truncate'),
        ('vllm_importance_sampling_clip_max', 'cispo.rollout_is_max', 2.0),
        ('use_vllm × vllm_importance_sampling_correction', 'cispo.trl_metrics', 'grpo'),  # TRL's sampling/* logged
        ('scale_rewards', 'advantage', 'grpo'),
        ('scale_rewards', 'advantage_kwargs.eps', 0.0001),
        ('num_iterations × steps_per_generation ÷ gradient_accumulation_steps', 'deployment.reuse', 2),
        ('(GRPOTrainer old_per_token_logps)', 'deployment.proximal', 'recompute'),
        ('num_generations', 'deployment.group', 16),
        ('top_p', 'deployment.top_p', 0.95),
        ('top_k', 'deployment.top_k', 0),
        ('use_vllm', 'deployment.report', 'truncated'),  # M1: TRL's vLLM reports processed log-probs
        ('--precision', 'precision_mismatch.sampler_dtype', 'bfloat16'),  # the default for a correcting config
        ('per_device_train_batch_size', '—', 8),
        ('beta', '—', 0.0),
        ('max_completion_length', '—', 4096),
        ('temperature', '—', 1.0),
        ('vllm_mode', '—', 'server'),
    ],
    "trl_dr_grpo.yaml": [
        ('loss_type × importance_sampling_level', 'estimator', 'ppo'),
        ('epsilon', 'ppo.eps_low', 0.2),
        ('epsilon', 'ppo.eps_high', 0.2),
        ('delta', 'ppo.dual_clip', None),
        ('loss_type', 'ppo.aggregation', 'seq-mean-token-sum-norm'),
        ('use_vllm × vllm_importance_sampling_correction × vllm_importance_sampling_mode', 'ppo.rollout_is', 'sequence_mask'),
        ('vllm_importance_sampling_clip_max', 'ppo.rollout_is_max', 3.0),
        ('use_vllm × vllm_importance_sampling_correction', 'ppo.trl_metrics', 'grpo'),  # TRL's sampling/* logged
        ('scale_rewards', 'advantage', 'dr_grpo'),
        ('num_iterations × steps_per_generation ÷ gradient_accumulation_steps', 'deployment.reuse', 1),
        ('(GRPOTrainer old_per_token_logps)', 'deployment.proximal', 'recompute'),
        ('num_generations', 'deployment.group', 8),
        ('top_p', 'deployment.top_p', 1.0),
        ('top_k', 'deployment.top_k', 0),
        ('use_vllm', 'deployment.report', 'truncated'),  # M1: TRL's vLLM reports processed log-probs
        ('--precision', 'precision_mismatch.sampler_dtype', 'bfloat16'),  # the default for a correcting config
        ('per_device_train_batch_size', '—', 16),
        ('beta', '—', 0.0),
        ('max_completion_length', '—', 1024),
        ('mask_truncated_completions', '—', True),
        ('temperature', '—', 1.0),
        ('vllm_mode', '—', 'colocate'),
    ],
    "trl_gspo.yaml": [
        ('loss_type × importance_sampling_level', 'estimator', 'gspo'),
        ('epsilon', 'gspo.eps_low', 0.0003),
        ('epsilon_high', 'gspo.eps_high', 0.0004),
        ('loss_type', 'gspo.aggregation', 'seq-mean-token-mean'),
        ('use_vllm × vllm_importance_sampling_correction × vllm_importance_sampling_mode', 'gspo.rollout_is', 'sequence_mask'),
        ('vllm_importance_sampling_clip_max', 'gspo.rollout_is_max', 3.0),
        ('use_vllm × vllm_importance_sampling_correction', 'gspo.trl_metrics', 'grpo'),  # TRL's sampling/* logged
        ('scale_rewards', 'advantage', 'grpo'),
        ('scale_rewards', 'advantage_kwargs.eps', 0.0001),
        ('num_iterations × steps_per_generation ÷ gradient_accumulation_steps', 'deployment.reuse', 2),
        ('(GRPOTrainer old_per_token_logps)', 'deployment.proximal', 'recompute'),
        ('num_generations', 'deployment.group', 8),
        ('top_p', 'deployment.top_p', 1.0),
        ('top_k', 'deployment.top_k', 0),
        ('use_vllm', 'deployment.report', 'truncated'),  # M1: TRL's vLLM reports processed log-probs
        ('--precision', 'precision_mismatch.sampler_dtype', 'bfloat16'),  # the default for a correcting config
        ('per_device_train_batch_size', '—', 8),
        ('beta', '—', 0.0),
        ('max_completion_length', '—', 2048),
    ],
    "verl_dapo_async.yaml": [  # the fully-async trainer's YAML sets bypass_mode: PPO-clip against μ
        ('algorithm.rollout_correction.loss_type', 'estimator', 'ppo'),
        ('actor_rollout_ref.actor.clip_ratio_low', 'ppo.eps_low', 0.2),
        ('actor_rollout_ref.actor.clip_ratio_high', 'ppo.eps_high', 0.28),
        ('actor_rollout_ref.actor.clip_ratio_c', 'ppo.dual_clip', 10.0),
        ('actor_rollout_ref.actor.loss_agg_mode', 'ppo.aggregation', 'token-mean'),
        ('algorithm.adv_estimator', 'advantage', 'grpo'),
        ('actor_rollout_ref.actor.ppo_epochs × async_training.require_batches', 'deployment.reuse', 4),
        ('async_training.trigger_parameter_sync_step × async_training.staleness_threshold', 'deployment.delay', {'kind': 'uniform', 'D': 17}),
        ('async_training.partial_rollout', 'deployment.partial', 2),
        ('algorithm.rollout_correction.bypass_mode', 'deployment.proximal', 'behavior'),
        ('actor_rollout_ref.rollout.calculate_log_probs × algorithm.rollout_correction.rollout_is', 'ppo.verl_metrics', (None, 2.0, None)),  # what verl logs as rollout_corr/*
        ('actor_rollout_ref.rollout.n', 'deployment.group', 16),
        ('actor_rollout_ref.rollout.top_p', 'deployment.top_p', 1.0),
        ('actor_rollout_ref.rollout.top_k', 'deployment.top_k', 0),
        ('actor_rollout_ref.rollout.logprobs_mode', 'deployment.report', 'truncated'),
        ('data.train_batch_size', '—', 0),
        ('algorithm.use_kl_in_reward', '—', False),
        ('algorithm.kl_ctrl.kl_coef', '—', 0.0),
        ('actor_rollout_ref.actor.use_kl_loss', '—', False),
        ('actor_rollout_ref.actor.kl_loss_coef', '—', 0.0),
        ('actor_rollout_ref.actor.ppo_mini_batch_size', '—', 32),
        ('actor_rollout_ref.actor.entropy_coeff', '—', 0),
        ('actor_rollout_ref.rollout.temperature', '—', 1.0),
        ('reward_model.reward_kwargs.overlong_buffer_cfg.enable', '—', True),
        ('reward_model.reward_kwargs.max_resp_len', '—', 8192),
    ],
    "verl_grpo_token_tis.yaml": [
        ('actor_rollout_ref.actor.policy_loss.loss_mode', 'estimator', 'ppo'),
        ('actor_rollout_ref.actor.clip_ratio_low', 'ppo.eps_low', 0.2),
        ('actor_rollout_ref.actor.clip_ratio_high', 'ppo.eps_high', 0.2),
        ('actor_rollout_ref.actor.clip_ratio_c', 'ppo.dual_clip', 3.0),
        ('algorithm.rollout_correction.rollout_is × algorithm.rollout_correction.rollout_is_threshold', 'ppo.rollout_is', 'token_truncate'),
        ('algorithm.rollout_correction.rollout_is_threshold', 'ppo.rollout_is_max', 2.0),
        ('actor_rollout_ref.actor.loss_agg_mode', 'ppo.aggregation', 'token-mean'),
        ('algorithm.adv_estimator', 'advantage', 'grpo'),
        ('actor_rollout_ref.actor.ppo_epochs × data.train_batch_size ÷ actor_rollout_ref.actor.ppo_mini_batch_size', 'deployment.reuse', 4),
        ('algorithm.rollout_correction.bypass_mode', 'deployment.proximal', 'recompute'),
        ('actor_rollout_ref.rollout.calculate_log_probs × algorithm.rollout_correction.rollout_is', 'ppo.verl_metrics', ('token', 2.0, None)),  # what verl logs as rollout_corr/*
        ('actor_rollout_ref.rollout.n', 'deployment.group', 5),
        ('actor_rollout_ref.rollout.top_p', 'deployment.top_p', 1.0),
        ('actor_rollout_ref.rollout.top_k', 'deployment.top_k', 0),
        ('actor_rollout_ref.rollout.logprobs_mode', 'deployment.report', 'truncated'),
        ('--precision', 'precision_mismatch.sampler_dtype', 'bfloat16'),  # the default for a correcting config
        ('actor_rollout_ref.actor.kl_loss_coef', '—', 0.001),
        ('actor_rollout_ref.actor.kl_loss_type', '—', 'low_var_kl'),
        ('actor_rollout_ref.actor.entropy_coeff', '—', 0),
        ('algorithm.use_kl_in_reward', '—', False),
    ],
    "verl_gspo.yaml": [
        ('actor_rollout_ref.actor.policy_loss.loss_mode', 'estimator', 'gspo'),
        ('actor_rollout_ref.actor.clip_ratio_low', 'gspo.eps_low', 0.0003),
        ('actor_rollout_ref.actor.clip_ratio_high', 'gspo.eps_high', 0.0004),
        ('actor_rollout_ref.actor.loss_agg_mode', 'gspo.aggregation', 'seq-mean-token-mean'),
        ('algorithm.adv_estimator', 'advantage', 'grpo'),
        ('actor_rollout_ref.actor.ppo_epochs × data.train_batch_size ÷ actor_rollout_ref.actor.ppo_mini_batch_size', 'deployment.reuse', 4),
        ('algorithm.rollout_correction.bypass_mode', 'deployment.proximal', 'recompute'),
        ('actor_rollout_ref.rollout.calculate_log_probs × algorithm.rollout_correction.rollout_is', 'gspo.verl_metrics', (None, 2.0, None)),  # what verl logs as rollout_corr/*
        ('actor_rollout_ref.rollout.n', 'deployment.group', 16),
        ('actor_rollout_ref.rollout.top_p', 'deployment.top_p', 1.0),
        ('actor_rollout_ref.rollout.top_k', 'deployment.top_k', 0),
        ('actor_rollout_ref.rollout.logprobs_mode', 'deployment.report', 'truncated'),
        ('actor_rollout_ref.actor.use_kl_loss', '—', False),
        ('actor_rollout_ref.actor.entropy_coeff', '—', 0),
        ('actor_rollout_ref.rollout.temperature', '—', 1.0),
        ('algorithm.use_kl_in_reward', '—', False),
    ],
    "verl_rollout_rs.yaml": [
        ('algorithm.rollout_correction.rollout_rs', 'estimator', 'rollout_rs'),
        ('algorithm.rollout_correction.loss_type', 'rollout_rs.loss', 'ppo_clip'),
        ('algorithm.rollout_correction.rollout_rs', 'rollout_rs.statistic', 'k3'),
        ('algorithm.rollout_correction.rollout_rs', 'rollout_rs.level', 'seq_mean'),
        ('algorithm.rollout_correction.rollout_rs_threshold', 'rollout_rs.upper', 0.01),
        ('actor_rollout_ref.actor.clip_ratio_low', 'rollout_rs.eps', 0.2),
        ('actor_rollout_ref.actor.clip_ratio_c', 'rollout_rs.dual_clip', 3.0),  # M6: verl applies it
        ('actor_rollout_ref.actor.loss_agg_mode', 'rollout_rs.aggregation', 'token-mean'),
        ('algorithm.adv_estimator', 'advantage', 'grpo'),
        ('actor_rollout_ref.actor.ppo_epochs × data.train_batch_size ÷ actor_rollout_ref.actor.ppo_mini_batch_size', 'deployment.reuse', 4),
        ('algorithm.rollout_correction.bypass_mode', 'deployment.proximal', 'behavior'),
        ('actor_rollout_ref.rollout.calculate_log_probs × algorithm.rollout_correction.rollout_is', 'rollout_rs.verl_metrics', (None, 2.0, None)),  # what verl logs as rollout_corr/*
        ('actor_rollout_ref.rollout.n', 'deployment.group', 8),
        ('actor_rollout_ref.rollout.top_p', 'deployment.top_p', 0.9),
        ('actor_rollout_ref.rollout.top_k', 'deployment.top_k', 0),
        ('actor_rollout_ref.rollout.logprobs_mode', 'deployment.report', 'truncated'),
        ('--precision', 'precision_mismatch.sampler_dtype', 'bfloat16'),  # the default for a correcting config
        ('actor_rollout_ref.actor.use_kl_loss', '—', False),
    ],
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_fixture_mapping_table_exactly(name):
    mapping = map_config(FIXTURES / name, ignore=IGNORE.get(name, []))
    assert [(r.key, r.field, r.value) for r in mapping.rows] == TABLES[name]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_recipe_holds_what_the_table_says(name):
    """Every estimator row's value is the recipe's (the table is what is scored, not a description)."""
    mapping = map_config(FIXTURES / name, ignore=IGNORE.get(name, []))
    recipe, dep = mapping.recipe, mapping.deployment
    for key, target, value in [(r.key, r.field, r.value) for r in mapping.rows]:
        head, _, field = target.partition(".")
        if target == "estimator":
            assert recipe.estimator == value
        elif head == recipe.estimator:
            assert recipe.estimator_kwargs[field] == value, (key, target)
        elif head == "deployment":
            assert getattr(dep, field) == value, (key, target)
        elif target == "advantage":
            assert recipe.advantage == value


def test_unknown_loss_mode_is_refused_in_one_line_naming_the_key():
    with pytest.raises(ValueError) as err:
        map_config(FIXTURES / "verl_unknown_loss.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("actor_rollout_ref.actor.policy_loss.loss_mode='gfpo': not a loss the check models")
    assert "--ignore actor_rollout_ref.actor.policy_loss.loss_mode" in message


def test_unmodelled_key_is_refused_unless_ignored_and_the_ignore_is_reported():
    with pytest.raises(ValueError, match=rf"^{KL}=True: a KL loss to a reference model is not modelled.*--ignore {KL}"):
        map_config(FIXTURES / "verl_grpo_token_tis.yaml")
    mapping = map_config(FIXTURES / "verl_grpo_token_tis.yaml", ignore=[KL])
    assert mapping.ignored == (KL,) and KL not in [r.key for r in mapping.rows]
    assert f"ignored on request (--ignore): {KL}" in mapping.text()
    assert f"`{KL}`" in _markdown_ignored(mapping)


def _markdown_ignored(mapping: Mapping) -> str:
    from sandbox.check.verdict import report_markdown

    summary = {"battery": "b", "version": 1, "hash": "0" * 12, "commit": "c", "new": mapping.label,
               "methods": [mapping.label], "seeds": {}, "cells": [], "probability_of_improvement": {mapping.label: {}},
               "aggregate": {mapping.label: {"iqm": {"estimate": 0, "low": 0, "high": 0}, "frictions": {},
                                             "diverged": 0, "runs": 0}}}
    return report_markdown(mapping, [], summary, summary, "", "b")


@pytest.mark.parametrize("config, message", [
    ({"algorithm.adv_estimator": "grpo", "actor_rollout_ref.actor.clip_ratio_hgih": 0.28},
     r"^actor_rollout_ref\.actor\.clip_ratio_hgih: not a verl setting the check knows"),
    ({"algorithm.adv_estimator": "gae"}, r"^algorithm\.adv_estimator='gae': not an advantage the check models"),
    ({"loss_type": "gfpo"}, r"^loss_type='gfpo': not a loss the check models"),
    ({"loss_type": "grpo", "beta": 0.04}, r"^beta=0\.04: a KL penalty to a reference model is not modelled"),
    ({"loss_type": "grpo", "scale_rewards": "batch"}, r"^scale_rewards='batch': 'group' or 'none' is modelled"),
    ({"loss_type": "cispo"}, r"^epsilon_high=None: with loss_type='cispo' TRL caps the IS weight"),
    ({"loss_type": "luspo"}, r"^importance_sampling_level='token': loss_type='luspo' at this level"),
    ({"algorithm.rollout_correction.rollout_rs": "seq_mean_k3"},
     r"^algorithm\.rollout_correction\.rollout_rs='seq_mean_k3': rejection sampling is modelled in bypass mode"),
    ({"num_generations": 8, "epsilon_hihg": 0.28}, r"^epsilon_hihg: not a trl setting the check knows"),
])
def test_bad_keys_are_one_line_naming_the_key(config, message):
    with pytest.raises(ValueError, match=message) as err:
        map_config(config)
    assert "\n" not in str(err.value)


def test_ignoring_a_key_the_config_does_not_set_is_bad_input():
    with pytest.raises(ValueError, match=r"^--ignore trainer\.nope: the config does not set this key$"):
        map_config(FIXTURES / "verl_gspo.yaml", ignore=["trainer.nope"])


def test_precision_adds_the_mismatch_and_its_row():
    mapping = map_config(FIXTURES / "verl_gspo.yaml", precision="bf16")
    assert mapping.deployment.precision == "bfloat16"
    assert mapping.rows[-1].key == "--precision" or any(r.key == "--precision" for r in mapping.rows)
    with pytest.raises(ValueError, match=r"precision must be one of \['bf16', 'fp16', 'off'\]"):
        map_config(FIXTURES / "verl_gspo.yaml", precision="int8")


def test_nested_dotted_and_override_forms_read_the_same():
    nested = {"actor_rollout_ref": {"actor": {"clip_ratio_high": 0.28, "policy_loss": {"loss_mode": "vanilla"}}},
              "algorithm": {"adv_estimator": "grpo"}}
    dotted = {"actor_rollout_ref.actor.clip_ratio_high": 0.28, "actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
              "algorithm.adv_estimator": "grpo"}
    mixed = {"actor_rollout_ref": {"actor.clip_ratio_high": 0.28, "actor": {"policy_loss.loss_mode": "vanilla"}},
             "algorithm.adv_estimator": "grpo"}
    assert read_config(nested)[1] == read_config(dotted)[1] == read_config(mixed)[1] == dotted
    assert map_config(nested).rows == map_config(dotted).rows


def test_interpolations_resolve_against_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  train_batch_size: 512\nactor_rollout_ref:\n  actor:\n"
                    "    ppo_mini_batch_size: ${oc.select:data.train_batch_size,256}\n"
                    "    use_rollout_log_probs: ${oc.select:async_training.use_rollout_log_probs,False}\n")
    source, flat, label = read_config(path)
    assert (source, label) == ("verl", "run")
    assert flat["actor_rollout_ref.actor.ppo_mini_batch_size"] == 512
    assert flat["actor_rollout_ref.actor.use_rollout_log_probs"] is False


@dataclasses.dataclass
class TrainingArguments:  # stands in for transformers' base class: infrastructure fields
    output_dir: str = "out"
    learning_rate: float = 1e-6
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 2
    bf16: bool = True


@dataclasses.dataclass
class GRPOConfig(TrainingArguments):  # the object itself, TRL not installed: its fields are read
    loss_type: str = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = 0.28
    beta: float = 0.0
    num_generations: int = 8
    num_iterations: int = 1
    steps_per_generation: int | None = 4
    importance_sampling_level: str = "token"
    scale_rewards: str = "group"
    use_vllm: bool = True
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = "token_mask"
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = 0.5
    top_p: float = 1.0
    top_k: int = 0
    temperature: float = 0.9
    mask_truncated_completions: bool = True


def test_a_grpo_config_object_reads_without_trl():
    mapping = map_config(GRPOConfig())
    assert mapping.source == "trl" and mapping.label == "GRPOConfig"
    assert mapping.recipe.estimator == "ppo"
    assert mapping.recipe.estimator_kwargs == {"eps_low": 0.2, "eps_high": 0.28, "dual_clip": None,
                                               "aggregation": "token-mean", "rollout_is": "token_mask",
                                               "rollout_is_max": 3.0, "rollout_is_min": 0.5, "trl_metrics": "grpo"}
    assert mapping.deployment.reuse == 2 and mapping.deployment.group == 8  # 4 micro-steps per generation ÷ GA 2
    assert set(mapping.infrastructure) == {"output_dir", "learning_rate", "bf16"}


def test_a_name_that_is_a_builtin_method_gets_a_suffix():
    mapping = map_config({"loss_type": "dapo"}, label="ppo")
    assert mapping.label == "ppo (config)" and mapping.recipe.name == "ppo (config)"


def test_not_a_config_is_one_line(tmp_path):
    for config, message in [(tmp_path / "missing.yaml", "does not exist"), (tmp_path / "x.ini", "must be a"),
                            ({"foo": 1}, "neither a verl trainer config"), (42, "config must be")]:
        with pytest.raises(ValueError, match=message):
            map_config(config)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ValueError, match="does not parse"):
        map_config(bad)
