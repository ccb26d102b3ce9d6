"""verl configs read as OmegaConf and Hydra read them (issue 46, R3): interpolations relative and
chained, a missing key an error, YAML merge keys and aliases, Hydra's override order, and the depth
and alias limits that refuse a bomb fast."""

import time

import pytest

from sandbox.check import map_config
from sandbox.check.loaders import MAX_DEPTH, MAX_NODES
from sandbox.check.readers import read_config

HEAD = "algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  rollout:\n    n: 4\n  actor:\n    clip_ratio_low: 0.1\n"


def _high(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return read_config(path)[1]["actor_rollout_ref.actor.clip_ratio_high"]


def test_relative_and_chained_interpolations_resolve_as_omegaconf(tmp_path):
    assert _high(tmp_path, HEAD + "    clip_ratio_high: ${.clip_ratio_low}\n") == 0.1
    chain = HEAD + "    clip_ratio: ${.clip_ratio_low}\n    clip_ratio_high: ${actor_rollout_ref.actor.clip_ratio}\n"
    assert _high(tmp_path, chain) == 0.1
    up = HEAD + "    clip_ratio_high: ${..rollout.n}\n"
    assert _high(tmp_path, up) == 4
    default = HEAD + "    clip_ratio_high: ${oc.select:actor_rollout_ref.actor.nothing,0.3}\n"
    assert _high(tmp_path, default) == 0.3
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + "    clip_ratio_high: ${.clip_ratio_low}\n")
    row = {r.field: r.value for r in map_config(path).rows}
    assert row["ppo.eps_high"] == 0.1


def test_a_reference_to_a_missing_key_is_omegaconfs_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + "    clip_ratio_high: ${.clip_ratio_lo}\n")
    with pytest.raises(ValueError, match=r"at 'actor_rollout_ref.actor.clip_ratio_high' does not resolve "
                                         r"\(OmegaConf: .*clip_ratio_lo"):
        map_config(path)


def test_merge_keys_and_aliases_load_as_omegaconf(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("base: &b {clip_ratio_low: 0.1, clip_ratio_high: 0.1}\n"
                    "actor_rollout_ref:\n  actor:\n    <<: *b\n    clip_ratio_high: 0.3\n"
                    "  rollout: {n: 4}\n")
    flat = read_config(path)[1]
    assert flat["actor_rollout_ref.actor.clip_ratio_low"] == 0.1
    assert flat["actor_rollout_ref.actor.clip_ratio_high"] == 0.3  # the mapping's own key wins over the merge
    path.write_text("actor_rollout_ref:\n  actor:\n    clip_ratio_low: 0.1\n    clip_ratio_low: 0.2\n")
    with pytest.raises(ValueError, match="sets key 'clip_ratio_low' twice in one mapping"):
        read_config(path)


def test_an_alias_bomb_is_refused_fast(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\nactor_rollout_ref: {rollout: {n: 2}}\n")
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"more than {MAX_NODES:,} values once its YAML aliases are substituted"):
        map_config(path)
    assert time.perf_counter() - start < 2.0


def test_deep_nesting_is_refused_in_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n")
    with pytest.raises(ValueError, match=f"nested more than {MAX_DEPTH} levels"):
        map_config(path)
    path.write_text("a: " + "[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(ValueError, match="config"):
        map_config(path)


def test_hydra_overrides_apply_in_order(tmp_path):
    path = tmp_path / "o.yaml"
    path.write_text("- actor_rollout_ref.rollout.n=4\n- actor_rollout_ref.actor.clip_ratio_high=0.3\n"
                    "- ++actor_rollout_ref.actor.clip_ratio_high=0.25\n- +trainer.logger=[console,wandb]\n"
                    "- actor_rollout_ref.actor.clip_ratio_low=${actor_rollout_ref.actor.clip_ratio_high}\n")
    flat = read_config(path)[1]
    assert flat["actor_rollout_ref.actor.clip_ratio_high"] == 0.25
    assert flat["actor_rollout_ref.actor.clip_ratio_low"] == 0.25
    assert flat["trainer.logger"] == ["console", "wandb"]
    path.write_text("- actor_rollout_ref.rollout.n=4\n- ~actor_rollout_ref.rollout.n\n- algorithm.adv_estimator=grpo\n")
    assert "actor_rollout_ref.rollout.n" not in read_config(path)[1]
    path.write_text("- actor_rollout_ref.rollout.n=4,8\n")
    with pytest.raises(ValueError, match="is a sweep"):
        read_config(path)
