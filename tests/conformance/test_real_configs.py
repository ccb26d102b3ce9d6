"""The pinned frameworks' own full configurations map: verl's generated default trainer config
(every key of ``_generated_ppo_trainer.yaml``) and a real TRL ``GRPOConfig`` object (every field of
TRL 1.16.0 with transformers' ``TrainingArguments``) — no key unknown to the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.check import map_config
from sandbox.check.readers import read_config

from .required import require


def test_verls_full_default_config_maps(tmp_path):
    require("verl.trainer.ppo.core_algos")
    import verl

    source = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    _, flat, _ = read_config(source)
    assert len(flat) > 400
    with pytest.raises(ValueError) as err:  # its default estimator, GAE, needs a critic: refused, nothing unknown
        map_config(source)
    assert str(err.value).startswith("algorithm.adv_estimator='gae'") and "not a verl setting" not in str(err.value)
    grpo = {**flat, "algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 8}
    mapping = map_config(grpo)
    assert mapping.recipe.estimator == "ppo" and mapping.recipe.advantage == "grpo"
    assert len(mapping.infrastructure) > 300


def test_a_real_grpo_config_object_maps():
    require("trl")
    from .trl_side import grpo_config

    config = grpo_config({"loss_type": "dapo", "num_generations": 8, "use_vllm": True, "epsilon_high": 0.28})
    mapping = map_config(config)
    assert mapping.label == "GRPOConfig" and mapping.recipe.estimator == "ppo"
    assert mapping.recipe.estimator_kwargs["eps_high"] == 0.28 and mapping.deployment.report == "truncated"
    assert mapping.deployment.reuse == 1  # steps_per_generation and generation_batch_size, as GRPOConfig set them
