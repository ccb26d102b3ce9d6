"""verl: the keys ``sandbox check`` reads, their defaults and how they map (data, plus ``derive``).

Read at volcengine/verl commit b178a3c (v0.7.0-125, 29 Jan 2026): ``verl/trainer/config/
{actor/actor.yaml, rollout/rollout.yaml, algorithm/rollout_correction.yaml, algorithm.py}``,
``verl/workers/config/actor.py``, ``verl/trainer/ppo/core_algos.py`` (the policy losses and
``compute_policy_loss_bypass_mode``) and ``verl/experimental/fully_async_policy`` (its config and
README). The mapping rules are in docs/check.md.
"""

from __future__ import annotations

import math

from sandbox.check.deployment import Deployment
from sandbox.check.mapping import Schema, Settings

A, R, G, C, AS = ("actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "algorithm.",
                  "algorithm.rollout_correction.", "async_training.")
EPS = {"eps_low": A + "clip_ratio_low", "eps_high": A + "clip_ratio_high"}
#: loss_mode → our estimator, its fields from their keys, and fields verl fixes for that loss
LOSSES = {
    "vanilla": ("ppo", {**EPS, "dual_clip": A + "clip_ratio_c"}, {}),
    "gspo": ("gspo", EPS, {"aggregation": "seq-mean-token-mean"}),  # verl's gspo ignores loss_agg_mode
    "geo_mean": ("gmpo", EPS, {}),
    "cispo": ("cispo", EPS, {}),
    "sapo": ("sapo", {"tau_pos": A + "tau_pos", "tau_neg": A + "tau_neg"}, {}),
    "clip_cov": ("clip_cov", {**EPS, "ratio": A + "policy_loss.clip_cov_ratio", "cov_lb": A + "policy_loss.clip_cov_lb",
                              "cov_ub": A + "policy_loss.clip_cov_ub"}, {}),
    "kl_cov": ("kl_cov", {"ratio": A + "policy_loss.kl_cov_ratio", "coef": A + "policy_loss.ppo_kl_coef"}, {}),
    "gpg": ("reinforce", {}, {}),
}
#: adv_estimator → our advantage and its kwargs (grpo's norm_adv_by_std_in_grpo=False is Dr. GRPO's)
ADVANTAGES = {"grpo": ("grpo", {}), "grpo_vectorized": ("grpo", {}), "rloo": ("rloo", {}),
              "rloo_vectorized": ("rloo", {}), "reinforce_plus_plus": ("reinforce_pp", {}),
              "reinforce_plus_plus_baseline": ("reinforce_pp", {"group_baseline": True})}
LOGPROBS_MODES = {"processed_logprobs": "truncated", "raw_logprobs": "full"}

DEFAULTS = {
    A + "policy_loss.loss_mode": "vanilla", A + "clip_ratio": 0.2, A + "clip_ratio_low": 0.2,
    A + "clip_ratio_high": 0.2, A + "clip_ratio_c": 3.0, A + "loss_agg_mode": "token-mean", A + "tau_pos": 1.0,
    A + "tau_neg": 1.05, A + "policy_loss.clip_cov_ratio": 0.0002, A + "policy_loss.clip_cov_lb": 1.0,
    A + "policy_loss.clip_cov_ub": 5.0, A + "policy_loss.kl_cov_ratio": 0.0002, A + "policy_loss.ppo_kl_coef": 0.1,
    A + "ppo_epochs": 1, A + "ppo_mini_batch_size": 256, "data.train_batch_size": 1024,
    A + "use_rollout_log_probs": False,
    G + "adv_estimator": "gae", G + "norm_adv_by_std_in_grpo": True,
    C + "rollout_is": None, C + "rollout_is_threshold": 2.0, C + "rollout_rs": None, C + "rollout_rs_threshold": None,
    C + "bypass_mode": False, C + "loss_type": "ppo_clip",
    R + "n": 1, R + "top_p": 1.0, R + "top_k": -1, R + "logprobs_mode": "processed_logprobs",
    AS + "staleness_threshold": 0.1, AS + "trigger_parameter_sync_step": 4, AS + "require_batches": 1,
    AS + "partial_rollout": True, AS + "use_rollout_log_probs": True, AS + "compute_prox_log_prob": False,
}
INERT = {
    R + "temperature": "the trainer scores at the same temperature, so it changes no ratio (the sandbox's policy is "
                       "its own temperature-1 policy)",
    R + "calculate_log_probs": "the engine's log-probs are read wherever the mapped loss needs μ",
    R + "dtype": "the sampler/learner precision mismatch is a cell only with --precision bf16",
    A + "kl_loss_coef": "read only with use_kl_loss", A + "kl_loss_type": "read only with use_kl_loss",
    G + "kl_penalty": "read only with use_kl_in_reward", G + "kl_ctrl.type": "read only with use_kl_in_reward",
    G + "kl_ctrl.kl_coef": "read only with use_kl_in_reward", G + "kl_ctrl.horizon": "read only with use_kl_in_reward",
    G + "kl_ctrl.target_kl": "read only with use_kl_in_reward", G + "lam": "GAE's λ; GAE is refused",
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": "the sandbox's answers have a fixed length: no "
                                                             "overlong penalty applies",
    "reward_model.reward_kwargs.max_resp_len": "the sandbox's answers have a fixed length",
}
REFUSED = {
    A + "use_kl_loss": ((False,), "a KL loss to a reference model is not modelled (the sandbox has no reference "
                                  "model; kl_coef penalises the distance to μ)"),
    G + "use_kl_in_reward": ((False,), "a KL penalty in the reward is not modelled"),
    A + "entropy_coeff": ((0, 0.0), "an entropy bonus is not modelled"),
    G + "gamma": ((1, 1.0), "discounting is not modelled (the reward comes at the end of the answer)"),
    G + "filter_groups.enable": ((False,), "dynamic sampling (DAPO's filter_groups) is not modelled"),
    G + "use_pf_ppo": ((False,), "preference-feedback PPO is not modelled"),
    C + "rollout_is_batch_normalize": ((False,), "batch-normalised IS weights are not modelled"),
    R + "do_sample": ((True,), "greedy rollouts are not modelled"),
}
INFRASTRUCTURE = (
    "data.*", "trainer.*", "critic.*", "reward_model.*", "custom_reward_function.*", "ray_kwargs.*", "hydra.*",
    "global_profiler.*", "defaults", "reward_manager*", "transfer_queue.*", "model_engine*", "rollout.*",
    "actor_rollout_ref.model.*", "actor_rollout_ref.ref.*", "actor_rollout_ref.hybrid_engine", "actor_rollout_ref.nccl*",
    "actor_rollout_ref.checkpoint_engine*", "async_training.checkpoint_engine.*", AS + "use_trainer_do_validate",
    A + "strategy", A + "ppo_micro_batch_size*", A + "use_dynamic_bsz", A + "ppo_max_token_len_per_gpu", A + "optim.*",
    A + "fsdp_config.*", A + "megatron.*", A + "checkpoint.*", A + "profiler.*", A + "use_torch_compile",
    A + "ulysses_sequence_parallel_size", A + "grad_clip", A + "shuffle", A + "data_loader_seed", A + "use_fused_kernels",
    A + "freeze_vision_tower", A + "router_replay.*", A + "use_remove_padding", A + "loss_scale_factor",
    A + "calculate_entropy", A + "use_prefix_grouper", A + "rollout_n", A + "_target_", A + "policy_loss._target_",
    A + "entropy_from_logits_with_chunking", A + "entropy_checkpointing",
    R + "name", R + "mode", R + "prompt_length", R + "response_length", R + "gpu_memory_utilization", R + "ignore_eos",
    R + "enforce_eager", R + "cudagraph_capture_sizes", R + "free_cache_engine", R + "*_parallel_size",
    R + "max_num_batched_tokens", R + "max_model_len", R + "max_num_seqs", R + "enable_chunked_prefill",
    R + "enable_prefix_caching", R + "scheduling_policy", R + "load_format", R + "log_prob_*", R + "disable_log_stats",
    R + "over_sample_rate", R + "multi_stage_wake_up", R + "engine_kwargs.*", R + "val_kwargs.*", R + "multi_turn.*",
    R + "agent.*", R + "trace.*", R + "layered_summon", R + "layer_name_map.*", R + "update_weights_bucket_megabytes",
    R + "skip_*", R + "checkpoint_engine.*", R + "_target_", R + "enable_sleep_mode", R + "quantization*",
)
VERSION = "volcengine/verl b178a3c (v0.7.0-125, 2026-01-29)"


def _loss(s: Settings, mode: str, bypass: bool = False) -> tuple[str, dict]:
    """The estimator of ``loss_mode`` with its fields; clip_ratio applies where low/high are null
    (in bypass mode verl's loss is vanilla PPO whatever loss_mode says)."""
    if mode not in LOSSES:
        s.refuse(A + "policy_loss.loss_mode", f"not a loss the check models (known: {', '.join(LOSSES)})")
    name, fields, fixed = LOSSES[mode]
    if not bypass:
        s.map(A + "policy_loss.loss_mode", "estimator", name)
    kwargs = {}
    for ours, theirs in fields.items():
        if s[theirs] is None and theirs in EPS.values():  # verl: a null clip_ratio_low/high is clip_ratio
            kwargs[ours] = s.map(A + "clip_ratio", f"{name}.{ours}", note=f"{theirs.split('.')[-1]} is null")
        else:
            kwargs[ours] = s.map(theirs, f"{name}.{ours}")
    if s.given(A + "clip_ratio") and not s.covered(A + "clip_ratio"):
        s.inert(A + "clip_ratio", "clip_ratio_low/high (default 0.2) take precedence")
    for ours, value in fixed.items():
        kwargs[ours] = s.map(A + "loss_agg_mode", f"{name}.{ours}", value, note=f"verl's {mode} loss fixes it")
    return name, kwargs


def _rejection(s: Settings, loss_type: str) -> tuple[str, dict]:
    """verl's rollout_rs (one option) and its threshold as the ``rollout_rs`` estimator's fields."""
    option = str(s[C + "rollout_rs"])
    level, _, statistic = option.rpartition("_")
    if "," in option or statistic not in ("k1", "k2", "k3") or level not in ("token", "seq_sum", "seq_mean", "seq_max"):
        s.refuse(C + "rollout_rs", "one option of token_k*, seq_sum_k*, seq_mean_k*, seq_max_k* is modelled")
    threshold = s[C + "rollout_rs_threshold"]
    lower, upper = (None, threshold) if not isinstance(threshold, str) else \
        tuple(float(x) for x in threshold.split("_")) if "_" in threshold else (None, float(threshold))
    s.map(C + "rollout_rs", "estimator", "rollout_rs", note="bypass: rejection sampling, then the loss_type's loss")
    kwargs = {"loss": s.map(C + "loss_type", "rollout_rs.loss", loss_type),
              "statistic": s.map(C + "rollout_rs", "rollout_rs.statistic", statistic),
              "level": s.map(C + "rollout_rs", "rollout_rs.level", level),
              "upper": s.map(C + "rollout_rs_threshold", "rollout_rs.upper", upper)}
    if lower is not None:
        kwargs["lower"] = s.map(C + "rollout_rs_threshold", "rollout_rs.lower", lower)
    if loss_type == "ppo_clip":
        low, high = (s[k] if s[k] is not None else s[A + "clip_ratio"] for k in EPS.values())
        if low != high:
            s.refuse(A + "clip_ratio_high", "an asymmetric clip with rollout_rs is not modelled (one ε)")
        kwargs["eps"] = s.map(A + "clip_ratio_low", "rollout_rs.eps", low)
        s.map(A + "clip_ratio_c", "—", note="not applied: rollout_rs's PPO clip has no dual clip")
    return "rollout_rs", kwargs


def _estimator(s: Settings) -> tuple[str, dict]:
    """The loss with the rollout correction: bypass mode (π_old = μ) or decoupled (three policies)."""
    is_level = s[C + "rollout_is"]
    if is_level not in (None, "token", "sequence"):
        s.refuse(C + "rollout_is", "IS at 'token' or 'sequence' level is modelled")
    if not s[C + "bypass_mode"]:
        if s[C + "rollout_rs"] is not None:
            s.refuse(C + "rollout_rs", "rejection sampling is modelled in bypass mode only (the rollout_rs estimator)")
        name, kwargs = _loss(s, s[A + "policy_loss.loss_mode"])
        if is_level is not None:
            kwargs["rollout_is"] = s.map(C + "rollout_is", f"{name}.rollout_is", f"{is_level}_truncate")
            kwargs["rollout_is_max"] = s.map(C + "rollout_is_threshold", f"{name}.rollout_is_max")
        return name, kwargs
    loss_type = s[C + "loss_type"]
    if loss_type not in ("ppo_clip", "reinforce"):
        s.refuse(C + "loss_type", "bypass mode's loss_type is 'ppo_clip' or 'reinforce'")
    if s[A + "policy_loss.loss_mode"] != "vanilla":
        s.inert(A + "policy_loss.loss_mode", "bypass mode replaces the loss (verl sets loss_mode='bypass_mode')")
    if s[C + "rollout_rs"] is not None:
        if loss_type == "reinforce" and is_level is not None:
            s.refuse(C + "rollout_is", "IS weights with rejection sampling in REINFORCE bypass are not modelled")
        return _rejection(s, loss_type)
    if loss_type == "ppo_clip":
        if is_level is not None:
            s.inert(C + "rollout_is", "not applied with loss_type ppo_clip: the clipped ratio π_θ/μ is the correction")
        s.map(C + "loss_type", "estimator", "ppo", note="bypass: PPO-clip with π_old = μ")
        return _loss(s, "vanilla", bypass=True)
    if is_level is None:
        return s.map(C + "loss_type", "estimator", "reinforce", note="bypass"), {}
    s.map(C + "loss_type", "estimator", "tis", note="bypass: REINFORCE with IS weights")
    return "tis", {"level": s.map(C + "rollout_is", "tis.level", is_level),
                   "C": s.map(C + "rollout_is_threshold", "tis.C")}


def _delay(sync: int, threshold: float, reuse: int) -> dict:
    """The fully-async trainer's delays in optimiser updates: ``trigger_parameter_sync_step`` local
    steps of ``reuse`` updates between syncs, U of them; staleness_threshold s = 0 cycles the delay
    through 0..U−1, s > 0 lets a fraction of samples reach one window further: U{0..U−1+⌈s·U⌉}."""
    updates = int(sync) * reuse
    if threshold and threshold > 0:
        return {"kind": "uniform", "D": updates - 1 + math.ceil(threshold * updates)}
    return {"kind": "per_actor", "n_actors": updates, "D": updates} if updates > 1 else {}


def derive(s: Settings) -> tuple[dict, Deployment]:
    name, kwargs = _estimator(s)
    if "aggregation" not in kwargs:
        kwargs["aggregation"] = s.map(A + "loss_agg_mode", f"{name}.aggregation")
    adv = s[G + "adv_estimator"]
    if adv not in ADVANTAGES:
        s.refuse(G + "adv_estimator", f"not an advantage the check models (known: {', '.join(ADVANTAGES)}; "
                                      "GAE needs a critic, which is not modelled)")
    advantage, adv_kwargs = ADVANTAGES[adv]
    if advantage == "grpo" and not s[G + "norm_adv_by_std_in_grpo"]:
        advantage = "dr_grpo"
    s.map(G + "adv_estimator" + (" × norm_adv_by_std_in_grpo" if advantage != "grpo" or
                                 s.given(G + "norm_adv_by_std_in_grpo") else ""), "advantage", advantage)
    for key, value in adv_kwargs.items():
        s.map(G + "adv_estimator", f"advantage_kwargs.{key}", value)
    run = {"estimator": name, "estimator_kwargs": kwargs, "advantage": advantage, "advantage_kwargs": adv_kwargs}
    asynchronous = any(key.startswith(AS) for key in s.flat)
    if asynchronous:  # each local step fetches require_batches mini-batches
        reuse = s.map(A + "ppo_epochs × " + AS + "require_batches", "deployment.reuse",
                      int(s[A + "ppo_epochs"]) * int(s[AS + "require_batches"]))
        delay = s.map(AS + "trigger_parameter_sync_step × " + AS + "staleness_threshold", "deployment.delay",
                      _delay(s[AS + "trigger_parameter_sync_step"], s[AS + "staleness_threshold"], reuse))
        behaviour = s[AS + "use_rollout_log_probs"] and not s[AS + "compute_prox_log_prob"]
        proximal_keys = f"{C}bypass_mode, {AS}use_rollout_log_probs, {AS}compute_prox_log_prob"
    else:
        batches = max(1, int(s["data.train_batch_size"]) // int(s[A + "ppo_mini_batch_size"]))
        reuse = s.map(A + "ppo_epochs × data.train_batch_size ÷ " + A + "ppo_mini_batch_size", "deployment.reuse",
                      int(s[A + "ppo_epochs"]) * batches)
        delay, behaviour, proximal_keys = {}, s[A + "use_rollout_log_probs"], f"{C}bypass_mode"
    partial = 2 if delay.get("kind") == "uniform" and s[AS + "partial_rollout"] else 1
    if asynchronous:
        s.map(AS + "partial_rollout", "deployment.partial", partial, note="2 chunks when samples outlive a sync")
    proximal = s.map(proximal_keys, "deployment.proximal",
                     "behavior" if s[C + "bypass_mode"] or behaviour else "recompute")
    mode = s[R + "logprobs_mode"]
    if mode not in LOGPROBS_MODES:
        s.refuse(R + "logprobs_mode", f"the check models {list(LOGPROBS_MODES)}")
    deployment = Deployment(group=int(s.map(R + "n", "deployment.group")),
                            top_p=float(s.map(R + "top_p", "deployment.top_p")),
                            top_k=s.map(R + "top_k", "deployment.top_k", max(0, int(s[R + "top_k"]))),
                            report=s.map(R + "logprobs_mode", "deployment.report", LOGPROBS_MODES[mode]),
                            reuse=reuse, delay=delay, partial=partial, proximal=proximal)
    return run, deployment


SCHEMA = Schema("verl", VERSION, DEFAULTS, INERT, REFUSED, INFRASTRUCTURE, derive)
