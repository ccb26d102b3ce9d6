"""verl: the keys ``sandbox check`` reads, their defaults and how they map (data, plus ``derive``).

One reading per verl version (``--framework``):

- ``verl==0.9.1`` (the default; tests/conformance runs its code): defaults from its
  ``_generated_ppo_trainer.yaml`` and the disaggregated trainers' YAMLs
  (``experimental/{fully_async,one_step_off}_policy/config``: ``bypass_mode: True``,
  ``calculate_log_probs: True``; the fully-async trainer recomputes π_old at the sync window's
  start when ``bypass_mode`` is off, ``fully_async_trainer.py::_compute_old_log_prob``), the losses
  and rollout correction from ``core_algos.py`` and ``rollout_corr_helper.py``;
  ``actor.use_rollout_log_probs`` is read by no 0.9.1 code, and ``async_training.use_rollout_log_probs``
  and ``compute_prox_log_prob`` are not 0.9.1 keys (Hydra refuses their overrides);
- ``verl@b178a3c`` (v0.7.0-125, 29 Jan 2026, the commit the public example scripts in
  tests/check/corpus come from): the fully-async trainer's own keys of that commit —
  ``async_training.use_rollout_log_probs`` (π_old = μ) and ``compute_prox_log_prob`` (π_old
  recomputed at the window start, over the YAML's bypass) — and the actor's
  ``use_rollout_log_probs``; every other row as at 0.9.1 (b178a3c's other defaults were read and
  equal them; its loss code was not run).
"""

from __future__ import annotations

import math

from sandbox.check.deployment import Deployment
from sandbox.check.mapping import Schema, Settings
from sandbox.check.validate import Spec
from sandbox.check.verl_losses import AS, EPS, LOSSES, A, C, G, R, estimator, is_threshold  # noqa: F401

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
    A + "loss_scale_factor": None,
    G + "adv_estimator": "gae", G + "norm_adv_by_std_in_grpo": True,
    C + "rollout_is": None, C + "rollout_is_threshold": 2.0, C + "rollout_rs": None, C + "rollout_rs_threshold": None,
    C + "bypass_mode": False, C + "loss_type": "ppo_clip",
    R + "n": 1, R + "calculate_log_probs": True, R + "top_p": 1.0, R + "top_k": -1, R + "logprobs_mode": "processed_logprobs",
    AS + "staleness_threshold": 0.1, AS + "trigger_parameter_sync_step": 4, AS + "require_batches": 1,
    AS + "partial_rollout": True,
}
#: b178a3c's fully-async keys (not keys at 0.9.1) and the actor's use_rollout_log_probs it read
B178A3C_DEFAULTS = {A + "use_rollout_log_probs": False, AS + "use_rollout_log_probs": True,
                    AS + "compute_prox_log_prob": False}
INERT = {
    R + "temperature": "the trainer scores at the same temperature, so it changes no ratio (the sandbox's policy is "
                       "its own temperature-1 policy)",
    R + "dtype": "the sampler/learner precision mismatch is a cell only with --precision bf16",
    R + "calculate_log_probs": "read with the rollout correction: verl applies rollout_is (decoupled) only when it "
                               "is on, and bypass mode stops without it",
    A + "kl_loss_coef": "read only with use_kl_loss", A + "kl_loss_type": "read only with use_kl_loss",
    G + "kl_penalty": "read only with use_kl_in_reward", G + "kl_ctrl.type": "read only with use_kl_in_reward",
    G + "kl_ctrl.kl_coef": "read only with use_kl_in_reward", G + "kl_ctrl.horizon": "read only with use_kl_in_reward",
    G + "kl_ctrl.target_kl": "read only with use_kl_in_reward", G + "lam": "GAE's λ; GAE is refused",
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": "the sandbox's answers have a fixed length: no "
                                                             "overlong penalty applies",
    "reward_model.reward_kwargs.max_resp_len": "the sandbox's answers have a fixed length",
    "reward.reward_kwargs.overlong_buffer_cfg.enable": "the sandbox's answers have a fixed length: no overlong "
                                                       "penalty applies",
    "reward.reward_kwargs.max_resp_len": "the sandbox's answers have a fixed length",
    A + "policy_loss.dro_beta": "read only with loss_mode dro (refused)",
    A + "use_rollout_log_probs": "read by no verl 0.9.1 code (π_old = μ is algorithm.rollout_correction.bypass_mode)",
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
    "distillation.enabled": ((False,), "distillation from a teacher model is not modelled"),
    A + "qat.enable": ((False,), "quantisation-aware training of the learner is not modelled"),
    R + "qat.enable": ((False,), "a quantised sampler is not modelled (--precision models a bf16/fp16 one)"),
}
INFRASTRUCTURE = (
    "data.*", "trainer.*", "critic.*", "reward_model.*", "custom_reward_function.*", "ray_kwargs.*", "hydra.*",
    "global_profiler.*", "defaults", "reward_manager*", "transfer_queue.*", "model_engine*", "rollout.*",
    "actor_rollout_ref.model.*", "actor_rollout_ref.ref.*", "actor_rollout_ref.hybrid_engine", "actor_rollout_ref.nccl*",
    "actor_rollout_ref.checkpoint_engine*", "async_training.checkpoint_engine.*", AS + "use_trainer_do_validate",
    AS + "use_dynamic_resource_scheduling", AS + "dynamic_schedule_*", AS + "concurrent_samples_per_replica",
    AS + "compute_advantage_in_rollout", R + "standalone_gpu_memory_utilization", "filter.*", "super_sample.*",
    A + "strategy", A + "ppo_micro_batch_size*", A + "use_dynamic_bsz", A + "ppo_max_token_len_per_gpu", A + "optim.*",
    A + "fsdp_config.*", A + "megatron.*", A + "checkpoint.*", A + "profiler.*", A + "use_torch_compile",
    A + "ulysses_sequence_parallel_size", A + "grad_clip", A + "shuffle", A + "data_loader_seed", A + "use_fused_kernels",
    A + "freeze_vision_tower", A + "router_replay.*", A + "use_remove_padding",
    A + "calculate_entropy", A + "use_prefix_grouper", A + "rollout_n", A + "_target_", A + "policy_loss._target_",
    A + "entropy_from_logits_with_chunking", A + "entropy_checkpointing",
    R + "name", R + "mode", R + "prompt_length", R + "response_length", R + "gpu_memory_utilization", R + "ignore_eos",
    R + "enforce_eager", R + "cudagraph_capture_sizes", R + "free_cache_engine", R + "*_parallel_size",
    R + "max_num_batched_tokens", R + "max_model_len", R + "max_num_seqs", R + "enable_chunked_prefill",
    R + "enable_prefix_caching", R + "scheduling_policy", R + "load_format", R + "log_prob_*", R + "disable_log_stats",
    R + "over_sample_rate", R + "multi_stage_wake_up", R + "engine_kwargs.*", R + "val_kwargs.*", R + "multi_turn.*",
    R + "agent.*", R + "trace.*", R + "layered_summon", R + "layer_name_map.*", R + "update_weights_bucket_megabytes",
    R + "skip_*", R + "checkpoint_engine.*", R + "_target_", R + "enable_sleep_mode", R + "quantization*",
    # verl 0.9.1's full default config (verl/trainer/config/_generated_ppo_trainer.yaml)
    "*._target_", "reward.*", "distillation.*", "skip.*", "sandbox_fusion.*", G + "filter_groups.*", G + "pf_ppo.*",
    A + "calculate_sum_pi_squared", A + "qat.*", A + "entropy_from_logits_chunk_size", A + "pad_to_length",
    R + "nnodes", R + "n_gpus_per_node", R + "full_determinism", R + "seed", R + "router_config_path",
    R + "enable_rollout_routing_replay", R + "moe_load_balance_metrics_interval", R + "profiler.*",
    R + "prometheus.*", R + "mtp", R + "mtp.*", R + "qat", R + "qat.*", R + "disaggregation.*",
)
VERSION = "verl 0.9.1"
VERSION_B178A3C = ("verl b178a3c (v0.7.0-125, 2026-01-29): its fully-async keys; every other key, default and loss "
                   "as verl 0.9.1")


def _delay(sync: int, threshold: float, reuse: int) -> dict:
    """The fully-async trainer's delays in optimiser updates: ``trigger_parameter_sync_step`` local
    steps of ``reuse`` updates between syncs, U of them; staleness_threshold s = 0 cycles the delay
    through 0..U−1, s > 0 lets a fraction of samples reach one window further: U{0..U−1+⌈s·U⌉}."""
    updates = int(sync) * reuse
    if threshold and threshold > 0:
        return {"kind": "uniform", "D": updates - 1 + math.ceil(threshold * updates)}
    return {"kind": "per_actor", "n_actors": updates, "D": updates} if updates > 1 else {}


def _advantage(s: Settings) -> tuple[str, dict]:
    """The advantage of ``adv_estimator``: grpo's std switch (read by ``grpo`` only: verl's
    ``compute_advantage`` does not pass it to ``grpo_vectorized``), and a group of one
    (``rollout.n`` = 1), where verl's group baselines are 0 (GRPO's std 1): A = R, our ``constant``."""
    adv = s[G + "adv_estimator"]
    if adv not in ADVANTAGES:
        s.refuse(G + "adv_estimator", f"not an advantage the check models (known: {', '.join(ADVANTAGES)}; "
                                      "GAE needs a critic, which is not modelled)")
    advantage, kwargs = ADVANTAGES[adv]
    key = G + "adv_estimator"
    if adv == "grpo" and not s[G + "norm_adv_by_std_in_grpo"]:
        advantage, key = "dr_grpo", key + " × norm_adv_by_std_in_grpo"
    elif adv == "grpo" and s.given(G + "norm_adv_by_std_in_grpo"):
        key += " × norm_adv_by_std_in_grpo"
    elif adv == "grpo_vectorized" and s.given(G + "norm_adv_by_std_in_grpo"):
        s.inert(G + "norm_adv_by_std_in_grpo", "verl's compute_advantage does not pass it to grpo_vectorized, "
                                               "which always divides by the std")
    if int(s[R + "n"]) == 1 and adv == "rloo_vectorized":
        s.refuse(R + "n", "with rloo_vectorized a group of one gets A = 0 (verl's rloo gives A = R): the run learns "
                          "nothing; set rollout.n > 1")
    if int(s[R + "n"]) == 1 and (advantage != "reinforce_pp" or kwargs):
        why = (f"rollout.n = 1: every group of one; verl's {adv} baseline is then 0" +
               (" and its std 1 (A = R/(1 + 1e-6))" if advantage == "grpo" else "") + ", so A = R")
        s.warn(f"{why}: no baseline, as a plain REINFORCE run (set actor_rollout_ref.rollout.n > 1 for a group "
               "baseline)")
        if advantage == "reinforce_pp":  # the group mean is 0: whitening over the batch alone
            return s.map(key + " × " + R + "n", "advantage", advantage, note=why), {}
        return s.map(key + " × " + R + "n", "advantage", "constant", note=why + " (a group of one)"), {}
    s.map(key, "advantage", advantage)
    for name, value in kwargs.items():
        s.map(G + "adv_estimator", f"advantage_kwargs.{name}", value)
    return advantage, kwargs


def _trainer(s: Settings) -> str:
    """Which verl trainer the keys belong to: 'fully-async' (an ``async_training`` section),
    'one-step-off' (a top-level ``rollout`` section without one: only the disaggregated trainers
    have it) or 'ppo'. The disaggregated trainers' YAMLs default ``bypass_mode`` and
    ``calculate_log_probs`` to True (verl/experimental/*/config/*_trainer.yaml)."""
    if any(key.startswith(AS) for key in s.every_key):
        kind = "fully-async"
    elif any(key.startswith("rollout.") for key in s.every_key):
        kind = "one-step-off"
    else:
        return "ppo"
    s.overrides[R + "calculate_log_probs"] = True
    if not (kind == "fully-async" and _legacy(s) and s[AS + "compute_prox_log_prob"]):
        s.overrides[C + "bypass_mode"] = True  # b178a3c's compute_prox_log_prob: decoupled, π_old recomputed
    return kind


def _legacy(s: Settings) -> bool:
    """Whether this reading has b178a3c's fully-async keys (``verl@b178a3c``)."""
    return AS + "compute_prox_log_prob" in s.schema.defaults


def _schedule(s: Settings, trainer: str) -> tuple[int, dict, str]:
    """(reuse, delay, π_old keys) of the trainer. fully-async: ``trigger_parameter_sync_step`` local
    steps of ``ppo_epochs × require_batches`` updates per sync; one-step-off: batch t+1 is generated
    while batch t trains, one step of K updates stale (a fixed delay K: update i of the step sees
    K + i, the 0..K−1 extra is not modelled); ppo: K = ppo_epochs × train_batch_size ÷ mini-batch."""
    if trainer == "fully-async":
        reuse = s.map(A + "ppo_epochs × " + AS + "require_batches", "deployment.reuse",
                      s[A + "ppo_epochs"] * s[AS + "require_batches"])
        delay = s.map(AS + "trigger_parameter_sync_step × " + AS + "staleness_threshold", "deployment.delay",
                      _delay(s[AS + "trigger_parameter_sync_step"], s[AS + "staleness_threshold"], reuse))
        return reuse, delay, (f"{C}bypass_mode, {AS}use_rollout_log_probs, {AS}compute_prox_log_prob" if _legacy(s)
                              else f"{C}bypass_mode")
    batches = max(1, s["data.train_batch_size"] // s[A + "ppo_mini_batch_size"])
    reuse = s.map(A + "ppo_epochs × data.train_batch_size ÷ " + A + "ppo_mini_batch_size", "deployment.reuse",
                  s[A + "ppo_epochs"] * batches)
    if trainer == "ppo":
        return reuse, {}, f"{C}bypass_mode"
    delay = s.map("rollout.* (one-step-off-policy trainer)", "deployment.delay", {"kind": "fixed", "D": reuse},
                  note="a top-level rollout section without async_training: verl's one-step-off-policy trainer "
                       "(verl/experimental/one_step_off_policy) trains on rollouts one step old")
    return reuse, delay, f"{C}bypass_mode"


def _proximal(s: Settings, trainer: str, keys: str, delay: dict) -> str:
    """π_old: μ (bypass, or the fully-async trainer's use_rollout_log_probs at b178a3c) or recomputed.
    The fully-async trainer recomputes it with the parameters of the sync window's start (M7:
    ``_compute_old_log_prob`` restores version 1; b178a3c's compute_prox_log_prob): here it is the
    current policy, so the clip binds less than in verl — stated, not modelled."""
    explicit = s.given(C + "bypass_mode")
    if not _legacy(s):  # 0.9.1: π_old = μ exactly in bypass mode
        behaviour = s[C + "bypass_mode"]
    elif trainer == "fully-async" and s[AS + "compute_prox_log_prob"] and not (explicit and s[C + "bypass_mode"]):
        behaviour = False  # b178a3c's key: π_old recomputed at the window's start, over the YAML's bypass
    else:
        legacy = trainer == "fully-async" and s[AS + "use_rollout_log_probs"] and not (explicit and not
                                                                                     s[C + "bypass_mode"])
        behaviour = s[C + "bypass_mode"] or legacy or (trainer == "ppo" and s[A + "use_rollout_log_probs"])
    proximal = s.map(keys, "deployment.proximal", "behavior" if behaviour else "recompute")
    if trainer == "fully-async" and proximal == "recompute" and delay:
        s.warn(f"the fully-async trainer recomputes π_old with the parameters of the sync window's start, up to "
               f"{delay.get('D', 0)} updates old; the sandbox recomputes it at the current policy, so its clip "
               "binds less than verl's (an approximation, docs/check.md)")
    return proximal


#: the rollout_corr/* metrics verl 0.9.1 logs with and without a rollout_is level (rollout_corr_helper.py)
OFFPOLICY_METRICS = ("kl", "chi2_token", "chi2_seq")
IS_METRICS = ("rollout_is_mean", "rollout_is_std", "rollout_is_eff_sample_size")


def _metrics(s: Settings, name: str) -> tuple:
    """What verl 0.9.1 logs as ``rollout_corr/*`` and how (``sandbox.estimators.rollout_corr``): with
    the engine's log-probs (``calculate_log_probs``) the decoupled trainer computes them once per batch
    from the recomputed π_old against μ (``ray_trainer.py``, ``compute_rollout_correction_and_add_to_batch``),
    bypass mode in the loss from π_θ against μ (``core_algos.compute_policy_loss_bypass_mode``, even
    where the weights are not applied); kl and χ² always, the IS weights' mean, std and ESS only at a
    ``rollout_is`` level, truncated at ``rollout_is_threshold`` (TIS) or zeroed outside it (IcePop)."""
    level = s[C + "rollout_is"]
    lower, upper = is_threshold(s) if level is not None else (None, 2.0)
    bypass = s[C + "bypass_mode"]
    s.logs += [f"rollout_corr/{m}" for m in OFFPOLICY_METRICS + (IS_METRICS if level is not None else ())]
    policy = "π_θ (bypass: computed in the loss)" if bypass else "the recomputed π_old (once per batch)"
    return s.map(f"{R}calculate_log_probs × {C}rollout_is", f"{name}.verl_metrics", (level, upper, lower),
                 note=f"the run logs verl's rollout_corr/* as verl computes them: {policy} against μ"
                      + (", at rollout_is_threshold" if level is not None else "; kl and χ² only (no rollout_is)"))


def derive(s: Settings) -> tuple[dict, Deployment]:
    trainer = _trainer(s)
    name, kwargs = estimator(s)
    if "aggregation" not in kwargs:
        kwargs["aggregation"] = s.map(A + "loss_agg_mode", f"{name}.aggregation")
    if s[A + "loss_scale_factor"] is not None:
        if kwargs["aggregation"] == "seq-mean-token-sum-norm":
            s.refuse(A + "loss_scale_factor", "a fixed divisor for seq-mean-token-sum-norm is not modelled (ours "
                                              "divides by the padded length, verl's default)")
        s.inert(A + "loss_scale_factor", "read only with loss_agg_mode seq-mean-token-sum-norm")
    advantage, adv_kwargs = _advantage(s)
    run = {"estimator": name, "estimator_kwargs": kwargs, "advantage": advantage, "advantage_kwargs": adv_kwargs}
    reuse, delay, proximal_keys = _schedule(s, trainer)
    partial = 2 if delay.get("kind") == "uniform" and s[AS + "partial_rollout"] else 1
    if trainer == "fully-async":
        s.map(AS + "partial_rollout", "deployment.partial", partial, note="2 chunks when samples outlive a sync")
    proximal = _proximal(s, trainer, proximal_keys, delay)
    if s[R + "calculate_log_probs"]:
        kwargs["verl_metrics"] = _metrics(s, name)
    mode = s[R + "logprobs_mode"]
    if mode not in LOGPROBS_MODES:
        s.refuse(R + "logprobs_mode", f"the check models {list(LOGPROBS_MODES)}")
    deployment = Deployment(group=s.map(R + "n", "deployment.group"),
                            top_p=float(s.map(R + "top_p", "deployment.top_p")),
                            top_k=s.map(R + "top_k", "deployment.top_k", max(0, s[R + "top_k"])),
                            report=s.map(R + "logprobs_mode", "deployment.report", LOGPROBS_MODES[mode]),
                            reuse=reuse, delay=delay, partial=partial, proximal=proximal)
    return run, deployment


#: ranges and types beyond the defaults' types (verl's own checks, or what the mapping needs)
SPECS = {
    R + "n": Spec("int", low=1), R + "top_p": Spec("number", low=0.0, high=1.0, low_open=True),
    R + "top_k": Spec("int", low=-1), A + "ppo_epochs": Spec("int", low=1), A + "ppo_mini_batch_size": Spec("int", low=1),
    "data.train_batch_size": Spec("int", low=1), A + "clip_ratio": Spec("number", low=0.0, none=True),
    A + "clip_ratio_low": Spec("number", low=0.0, none=True, finite=False),
    A + "clip_ratio_high": Spec("number", low=0.0, none=True, finite=False),
    A + "clip_ratio_c": Spec("number", low=1.0, low_open=True, finite=False), A + "tau_pos": Spec("number", low=0.0,
                                                                                                  low_open=True),
    A + "tau_neg": Spec("number", low=0.0, low_open=True), A + "loss_scale_factor": Spec("int", low=1, none=True),
    AS + "staleness_threshold": Spec("number", low=0.0), AS + "trigger_parameter_sync_step": Spec("int", low=1),
    AS + "require_batches": Spec("int", low=1), C + "rollout_is": Spec("str", none=True),
    C + "rollout_rs": Spec("str", none=True), C + "rollout_is_threshold": Spec("any"),
    C + "rollout_rs_threshold": Spec("any"),  # numbers or 'lower_upper' strings: verl_losses parses them
}
#: what a verl user can select instead with the same π_old: each registered loss mode the check maps
#: (decoupled), bypass mode's loss types, and the rollout correction's two levels
ALTERNATIVES = (*({A + "policy_loss.loss_mode": mode} for mode in ("vanilla", "gspo", "cispo", "sapo", "geo_mean",
                                                                   "clip_cov", "kl_cov")),
                {C + "rollout_is": "token"}, {C + "rollout_is": "sequence"},
                {C + "loss_type": "ppo_clip"}, {C + "loss_type": "reinforce"},
                {C + "loss_type": "reinforce", C + "rollout_is": "token"},
                {C + "loss_type": "reinforce", C + "rollout_is": "sequence"})
SCHEMA = Schema("verl", VERSION, DEFAULTS, INERT, REFUSED, INFRASTRUCTURE, derive, SPECS, ALTERNATIVES)
SCHEMA_B178A3C = Schema("verl", VERSION_B178A3C, {**DEFAULTS, **B178A3C_DEFAULTS},
                        {k: v for k, v in INERT.items() if k not in B178A3C_DEFAULTS}, REFUSED, INFRASTRUCTURE, derive,
                        SPECS, ALTERNATIVES)
#: the readings ``--framework`` selects (the first is the default: the version tests/conformance runs)
VERSIONS = {"0.9.1": SCHEMA, "b178a3c": SCHEMA_B178A3C}
