"""verl configs read as OmegaConf and Hydra read them (issue 46, R3): interpolations relative and
chained, a missing key an error, YAML merge keys and aliases, Hydra's override order, and the depth
and alias limits that refuse a bomb fast."""

import time

import pytest

from sandbox.check import map_config
from sandbox.check.loaders import MAX_DEPTH, MAX_NODES
from sandbox.check.readers import read_config

HEAD = "algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  rollout:\n    n: 4\n  actor:\n    clip_ratio_low: 0.1\n"
LOW, HIGH = "actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_high"
MERGE = ("base: &b {clip_ratio_low: 0.1, clip_ratio_high: 0.1}\n"
         "actor_rollout_ref:\n  actor:\n    <<: *b\n    clip_ratio_high: 0.3\n  rollout: {n: 4}\n")
OVERRIDES = ("- actor_rollout_ref.rollout.n=4\n- actor_rollout_ref.actor.clip_ratio_high=0.3\n"
             "- ++actor_rollout_ref.actor.clip_ratio_high=0.25\n- +trainer.logger=[console,wandb]\n"
             "- actor_rollout_ref.actor.clip_ratio_low=${actor_rollout_ref.actor.clip_ratio_high}\n")


def _config(tmp_path, text: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, key, value", [
    (HEAD + "    clip_ratio_high: ${.clip_ratio_low}\n", HIGH, 0.1),  # relative
    (HEAD + "    clip_ratio: ${.clip_ratio_low}\n    clip_ratio_high: ${actor_rollout_ref.actor.clip_ratio}\n",
     HIGH, 0.1),  # chained
    (HEAD + "    clip_ratio_high: ${..rollout.n}\n", HIGH, 4),  # up a level
    (HEAD + "    clip_ratio_high: ${oc.select:actor_rollout_ref.actor.nothing,0.3}\n", HIGH, 0.3),  # a default
    (MERGE, LOW, 0.1),  # a YAML merge key
    (MERGE, HIGH, 0.3),  # the mapping's own key wins over the merge
    (OVERRIDES, HIGH, 0.25),  # Hydra's overrides in order: ++ replaces
    (OVERRIDES, LOW, 0.25),  # an interpolation sees the overrides before it
    (OVERRIDES, "trainer.logger", ["console", "wandb"]),  # + adds a list
])
def test_values_read_as_omegaconf_and_hydra_read_them(tmp_path, text, key, value):
    assert read_config(_config(tmp_path, text))[1][key] == value


def test_an_interpolated_value_is_mapped(tmp_path):
    path = _config(tmp_path, HEAD + "    clip_ratio_high: ${.clip_ratio_low}\n")
    assert {r.field: r.value for r in map_config(path).rows}["ppo.eps_high"] == 0.1


def test_a_hydra_deletion_removes_the_key(tmp_path):
    text = "- actor_rollout_ref.rollout.n=4\n- ~actor_rollout_ref.rollout.n\n- algorithm.adv_estimator=grpo\n"
    assert "actor_rollout_ref.rollout.n" not in read_config(_config(tmp_path, text))[1]


@pytest.mark.parametrize("text, message", [
    (HEAD + "    clip_ratio_high: ${.clip_ratio_lo}\n",  # OmegaConf's error for a missing key
     r"at 'actor_rollout_ref.actor.clip_ratio_high' does not resolve \(OmegaConf: .*clip_ratio_lo"),
    ("actor_rollout_ref:\n  actor:\n    clip_ratio_low: 0.1\n    clip_ratio_low: 0.2\n",
     "sets key 'clip_ratio_low' twice in one mapping"),
    ("- actor_rollout_ref.rollout.n=4,8\n", "is a sweep"),
    ("a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n", f"nested more than {MAX_DEPTH} levels"),
    ("a: " + "[" * 200_000 + "]" * 200_000 + "\n", "config"),
])
def test_what_omegaconf_and_hydra_refuse_is_refused_in_one_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        map_config(_config(tmp_path, text))


def test_an_alias_bomb_is_refused_fast(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = _config(tmp_path, "\n".join(lines) + "\nactor_rollout_ref: {rollout: {n: 2}}\n", "bomb.yaml")
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"more than {MAX_NODES:,} values once its YAML aliases are substituted"):
        map_config(path)
    assert time.perf_counter() - start < 2.0
