"""The mapping errors of issue 34 (M1–M8), each on a configuration of its kind, and the input
defects around them (issue 34, and issue 36's ``sandbox check`` inputs): every bad value refused in
one line under the config's own key, every unknown key at once, duplicated keys refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.check import map_config, prepare

A, R, G, C, AS = ("actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "algorithm.",
                  "algorithm.rollout_correction.", "async_training.")
GRPO = {G + "adv_estimator": "grpo", R + "n": 8}


def _row(mapping, field: str):
    return next(r for r in mapping.rows if r.field == field)


# ----------------------------------------------------------------------------- M1 … M8
def test_m1_trl_vllm_reports_processed_log_probs():
    """TRL starts vLLM with logprobs_mode='processed_logprobs': under top-p the engine's μ is the
    truncated distribution's, as verl's default."""
    m = map_config({"loss_type": "dapo", "num_generations": 8, "use_vllm": True, "top_p": 0.9})
    assert m.deployment.report == "truncated"
    assert "processed_logprobs" in _row(m, "deployment.report").note
    assert map_config({"loss_type": "dapo", "num_generations": 8, "top_p": 0.9}).deployment.report == "full"


def test_m2_one_step_off_policy_trainer():
    """verl's one-step-off-policy config: a top-level rollout section, bypass_mode and
    calculate_log_probs on; it trains one full step (K updates) stale against μ."""
    config = {**GRPO, "rollout.nnodes": 1, "rollout.n_gpus_per_node": 8, A + "ppo_mini_batch_size": 64,
              "data.train_batch_size": 256, R + "calculate_log_probs": True, C + "bypass_mode": True}
    m = map_config(config)
    assert m.deployment.delay == {"kind": "fixed", "D": 4} and m.deployment.proximal == "behavior"
    assert "one-step-off" in _row(m, "deployment.delay").note
    # its YAML sets bypass_mode: a file that does not repeat it is still the bypass trainer
    bare = {k: v for k, v in config.items() if k != C + "bypass_mode"}
    assert map_config(bare).deployment.proximal == "behavior"
    assert any(c.name == "reversal/deploy-async-D4" for c in prepare(config)[1].cells)


def test_m3_a_group_of_one_has_no_baseline():
    m = map_config({G + "adv_estimator": "grpo"})  # rollout.n left at verl's default 1
    assert m.recipe.advantage == "constant" and m.recipe.advantage_kwargs == {}
    assert any("rollout.n = 1" in w for w in m.warnings)
    assert "warning: rollout.n = 1" in m.text()
    with pytest.raises(ValueError, match=r"rollout\.n=1: with rloo_vectorized .* \(the verl 0.9.1 default; set"):
        map_config({G + "adv_estimator": "rloo_vectorized"})


def test_m4_generation_batch_size_sets_the_reuse():
    """LoRA-without-regret's shape: generation_batch_size 64 over per-device batches of 16 is
    steps_per_generation 4; with gradient_accumulation_steps 2, two updates per generation."""
    m = map_config({"loss_type": "dapo", "num_generations": 8, "generation_batch_size": 64,
                    "per_device_train_batch_size": 16, "gradient_accumulation_steps": 2})
    assert m.deployment.reuse == 2
    assert "one process assumed" in _row(m, "deployment.reuse").note
    with pytest.raises(ValueError, match="^steps_per_generation=3: and generation_batch_size cannot both"):
        map_config({"num_generations": 8, "generation_batch_size": 64, "steps_per_generation": 3})


@pytest.mark.parametrize("loss", ["sapo", "geo_mean"])
def test_m5_sapo_and_geo_mean_fix_their_aggregation(loss):
    m = map_config({**GRPO, A + "policy_loss.loss_mode": loss, A + "loss_agg_mode": "token-mean"})
    assert m.recipe.estimator_kwargs["aggregation"] == "seq-mean-token-mean"
    assert "ignores loss_agg_mode" in _row(m, f"{m.recipe.estimator}.aggregation").note


def test_m6_rejection_with_ppo_clip_applies_clip_ratio_c():
    m = map_config({**GRPO, C + "bypass_mode": True, C + "rollout_rs": "seq_mean_k3", C + "rollout_rs_threshold": 0.01,
                    A + "clip_ratio_c": 10.0})
    assert m.recipe.estimator == "rollout_rs" and m.recipe.estimator_kwargs["dual_clip"] == 10.0


@pytest.mark.parametrize("legacy", [True, False])
def test_m7_fully_async_window_start_pi_old_is_stated(legacy):
    """π_old recomputed at the sync window's start (b178a3c's compute_prox_log_prob; verl 0.9.1's
    fully-async trainer without bypass_mode): an approximation, said in the report."""
    extra = {AS + "compute_prox_log_prob": True} if legacy else {C + "bypass_mode": False}
    m = map_config({**GRPO, AS + "trigger_parameter_sync_step": 4, AS + "require_batches": 2, **extra},
                   framework="verl@b178a3c" if legacy else None)
    assert m.deployment.proximal == "recompute"
    assert any("sync window's start" in w for w in m.warnings)


def test_m8_yaml_floats_read_as_hydra_and_trl_read_them(tmp_path):
    trl = tmp_path / "gspo.yaml"
    trl.write_text("loss_type: grpo\nimportance_sampling_level: sequence\nepsilon: 3e-4\nepsilon_high: 4e-4\n"
                   "num_generations: 8\n")
    m = map_config(trl)
    assert m.recipe.estimator_kwargs["eps_low"] == 3e-4 and m.recipe.estimator_kwargs["eps_high"] == 4e-4
    verl = tmp_path / "verl.yaml"
    verl.write_text("- algorithm.adv_estimator=grpo\n- actor_rollout_ref.rollout.n=8\n"
                    "- actor_rollout_ref.actor.policy_loss.loss_mode=gspo\n"
                    "- actor_rollout_ref.actor.clip_ratio_low=3e-4\n- actor_rollout_ref.actor.clip_ratio_high=4e-4\n")
    assert map_config(verl).recipe.estimator_kwargs["eps_low"] == 3e-4


# ----------------------------------------------------------------------------- bad values, their key
@pytest.mark.parametrize("config,message", [
    ({**GRPO, R + "top_k": None}, rf"^{R}top_k must be an integer, got null"),
    ({**GRPO, A + "ppo_mini_batch_size": 0}, rf"^{A}ppo_mini_batch_size must lie in \[1, inf\], got 0"),
    ({**GRPO, R + "top_p": 0}, rf"^{R}top_p must lie in \(0.0, 1.0\]"),
    ({**GRPO, R + "top_p": 1.5}, rf"^{R}top_p must lie in \(0.0, 1.0\], got 1.5"),
    ({**GRPO, R + "top_k": -5}, rf"^{R}top_k must lie in \[-1, inf\], got -5"),
    ({**GRPO, R + "n": 2.5}, rf"^{R}n must be an integer"),
    ({"num_generations": 2.5}, r"^num_generations must be an integer"),
    ({"num_generations": 8, "use_vllm": "false"}, r"^use_vllm must be true or false, got str 'false' \(a string"),
    ({"num_generations": 8, "epsilon": "0.2"}, r"^epsilon must be a number, got the string '0.2'"),
    ({"num_generations": 8, "epsilon": "abc"}, r"^epsilon must be a number"),
    ({"num_generations": 8, "epsilon_high": -0.1}, r"^epsilon_high must lie in \[0.0, inf\]"),
    ({**GRPO, A + "clip_ratio_c": 0.5}, rf"^{A}clip_ratio_c must lie in \(1.0, inf\]"),
    ({**GRPO, C + "bypass_mode": "true"}, rf"^{C}bypass_mode must be true or false"),
    ({**GRPO, A + "policy_loss.loss_mode": "cispo", A + "clip_ratio_high": "0.2"},
     rf"^{A}clip_ratio_high must be a number"),
    ({"num_generations": 8, "use_vllm": True, "vllm_importance_sampling_mode": "sequence_truncate",
      "vllm_importance_sampling_clip_max": None}, r"^vllm_importance_sampling_clip_max=None: a \*_truncate mode"),
])
def test_bad_values_name_their_key(config, message):
    with pytest.raises(ValueError, match=message) as err:
        map_config(config)
    assert "\n" not in str(err.value)


def test_an_estimator_refusal_names_the_key_that_set_the_field():
    """After mapping, the estimator's own validation (a RunConfig's) runs; its refusal is restated
    under the config key: TRL's vespo k below 0 is refused by our vespo, named as vespo_k_pos."""
    with pytest.raises(ValueError, match=r"^vespo_k_pos=-1.0 \(mapped to vespo.k_pos\): k_pos"):
        map_config({"loss_type": "vespo", "num_generations": 8, "vespo_k_pos": -1.0})


def test_every_unknown_key_at_once():
    config = {"num_generations": 8, "epsilon_hihg": 0.28, "lr_warmup": 3, "rolout_n": 4, "beta": 0.04}
    with pytest.raises(ValueError) as err:
        map_config(config)
    text = str(err.value)
    assert text.startswith("epsilon_hihg, lr_warmup, rolout_n: not 3 trl settings the check knows")
    assert "beta=0.04: a KL penalty" in text  # the refused value in the same line
    assert "--ignore epsilon_hihg lr_warmup rolout_n beta" in text and "\n" not in text


def test_ignore_is_suggested_only_for_keys_the_file_sets():
    with pytest.raises(ValueError) as err:
        map_config({G + "adv_estimator": "rloo_vectorized"})  # rollout.n = 1 is verl's default
    assert "--ignore" not in str(err.value)
    with pytest.raises(ValueError, match="pass --ignore actor_rollout_ref.actor.clip_ratio_high"):
        map_config({G + "adv_estimator": "grpo", R + "n": 4, C + "bypass_mode": True, C + "rollout_rs": "seq_mean_k3",
                    C + "rollout_rs_threshold": 0.01, A + "clip_ratio_high": 0.28})


def test_every_ignore_suggestion_leads_somewhere():
    """An --ignore that would leave a default refused the same way is not suggested (issue 45: --ignore
    algorithm.adv_estimator led to a second refusal); the suggestion made is followed and passes."""
    with pytest.raises(ValueError, match=r"set it to a value the check models \(--ignore actor_rollout_ref\.rollout\.n "
                                         r"would leave the verl 0\.9\.1 default 1, refused too\)") as err:
        map_config({G + "adv_estimator": "rloo_vectorized", R + "n": 1})
    assert "pass --ignore" not in str(err.value)
    with pytest.raises(ValueError, match="would leave the verl 0.9.1 default 'gae', refused too") as err:
        map_config({G + "adv_estimator": "gpg", R + "n": 4})
    assert "pass --ignore" not in str(err.value)
    config = {G + "adv_estimator": "grpo", R + "n": 4, C + "bypass_mode": True, C + "rollout_rs": "seq_mean_k3",
              C + "rollout_rs_threshold": 0.01, A + "clip_ratio_high": 0.28, A + "use_kl_loss": True}
    with pytest.raises(ValueError) as err:
        map_config(config)
    suggested = str(err.value).split("pass --ignore ", 1)[1].split(" to check")[0].split()
    assert sorted(suggested) == [A + "clip_ratio_high", A + "use_kl_loss"]
    assert map_config(config, ignore=suggested).recipe.estimator == "rollout_rs"


# ----------------------------------------------------------------------------- what a file says twice
def test_duplicated_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("actor_rollout_ref:\n  actor:\n    clip_ratio_low: 0.2\n    clip_ratio_low: 0.3\n")
    with pytest.raises(ValueError, match=r"dup\.yaml': sets key 'clip_ratio_low' twice"):
        map_config(path)


def test_nested_and_dotted_contradiction_is_refused(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("actor_rollout_ref:\n  actor:\n    clip_ratio_high: 0.28\n"
                    "actor_rollout_ref.actor.clip_ratio_high: 0.2\nalgorithm.adv_estimator: grpo\n")
    with pytest.raises(ValueError, match=r"'actor_rollout_ref\.actor\.clip_ratio_high' twice \(nested and dotted\)"):
        map_config(path)


def test_duplicated_override_and_json_keys_are_refused(tmp_path):
    overrides = tmp_path / "o.yaml"
    overrides.write_text("- algorithm.adv_estimator=grpo\n- actor_rollout_ref.rollout.n=4\n"
                         "- algorithm.adv_estimator=rloo\n")
    assert map_config(overrides).recipe.advantage == "rloo"  # Hydra applies overrides in order: last wins
    overrides.write_text("- +algorithm.adv_estimator=grpo\n- +algorithm.adv_estimator=rloo\n")
    with pytest.raises(ValueError, match="Hydra cannot append to config, an item is already at"):
        map_config(overrides)
    js = tmp_path / "c.json"
    js.write_text('{"num_generations": 8, "epsilon": 0.2, "epsilon": 0.3}')
    with pytest.raises(ValueError, match="sets key 'epsilon' twice"):
        map_config(js)


# ----------------------------------------------------------------------------- other frameworks
def test_areal_and_openrlhf_configs_are_refused(tmp_path):
    areal = {"experiment_name": "gsm8k", "allocation_mode": "sglang.d4p1t1+d4p1t1", "gconfig": {"n_samples": 4},
             "rollout": {"max_head_offpolicyness": 4}, "actor": {"eps_clip": 0.4}}
    with pytest.raises(ValueError, match="^config is an AReaL config .*max_head_offpolicyness"):
        map_config(areal)
    path = tmp_path / "openrlhf.json"
    path.write_text(json.dumps({"advantage_estimator": "group_norm", "n_samples_per_prompt": 8, "eps_clip": 0.2}))
    with pytest.raises(ValueError, match=r"config is an OpenRLHF \(< 0.9\) config"):
        map_config(path)


# ----------------------------------------------------------------------------- the mismatch cell
def test_a_correcting_config_gets_a_mismatch_cell_by_default():
    config = {**GRPO, C + "rollout_is": "token"}
    m = map_config(config)
    assert m.deployment.precision == "bfloat16"
    assert _row(m, "precision_mismatch.sampler_dtype").note.startswith("default: the config corrects")
    assert map_config(config, precision="off").deployment.precision is None
    assert map_config(config, precision="fp16").deployment.precision == "float16"
    assert map_config(GRPO).deployment.precision is None  # nothing to correct, no cell unless asked


def test_an_aggregation_we_do_not_have_is_refused_under_its_key():
    """verl's ``token-sum`` has no counterpart here: refused through the estimator's own validation,
    naming verl's key."""
    with pytest.raises(ValueError, match=rf"^{A}loss_agg_mode='token-sum' \(mapped to ppo.aggregation\): aggregation"):
        map_config({**GRPO, A + "loss_agg_mode": "token-sum"})


def test_fully_async_compute_prox_log_prob_is_decoupled_not_bypass():
    """Issue 45's regression (verl_fully_async_grpo30b_mis.yaml): read as verl b178a3c,
    compute_prox_log_prob=True is the decoupled trainer (π_old recomputed at the sync window's start),
    so rollout_rs is refused as decoupled rejection sampling, never "an asymmetric clip"; with it
    ignored the run maps to PPO-clip 0.2/0.28 with π_old recomputed, not bypass."""
    path = Path(__file__).parent / "corpus" / "verl_fully_async_grpo30b_mis.yaml"
    with pytest.raises(ValueError) as err:
        map_config(path, framework="verl@b178a3c", ignore=[A + "use_kl_loss"])
    assert "rejection sampling is modelled in bypass mode only" in str(err.value)
    assert "asymmetric" not in str(err.value)
    m = map_config(path, framework="verl@b178a3c", ignore=[A + "use_kl_loss", C + "rollout_rs"])
    assert m.recipe.estimator == "ppo" and m.deployment.proximal == "recompute"
    assert (m.recipe.estimator_kwargs["eps_low"], m.recipe.estimator_kwargs["eps_high"]) == (0.2, 0.28)
    assert any("sync window's start" in w for w in m.warnings)
    assert m.version.startswith("verl b178a3c")
