"""TRL: the ``GRPOConfig`` keys ``sandbox check`` reads, their defaults and how they map.

One reading, TRL 1.16.0 (every ``GRPOConfig`` field, with transformers' ``TrainingArguments``, is
read, inert, refused or infrastructure, and every default here is 1.16.0's — tests/conformance
checks both and runs ``GRPOTrainer._compute_loss`` beside ours; first read at commit f2cd577):
``trl/trainer/grpo_config.py`` (fields, defaults, ``steps_per_generation`` from
``generation_batch_size``) and ``trl/trainer/grpo_trainer.py`` (``_compute_loss``: the loss types
and their normalisers, the vLLM importance-sampling correction, the advantages' ``1e-4``). TRL's
trainer always recomputes π_old (``old_per_token_logps``) and reads the engine's μ only through the
vLLM correction; it starts vLLM with ``logprobs_mode="processed_logprobs"`` (colocate,
``trl/generation/vllm_generation.py``; a server in another mode is refused by the trainer), so under
top-p/top-k the engine's log-probs are the truncated distribution's.
"""

from __future__ import annotations

from sandbox.check.deployment import Deployment
from sandbox.check.mapping import Schema, Settings
from sandbox.check.validate import Spec
from sandbox.estimators.trl_metrics import METRICS as TRL_METRICS

#: loss_type → (aggregation, at token level: estimator, at sequence level: estimator)
LOSSES = {"grpo": ("seq-mean-token-mean", "ppo", "gspo"), "bnpo": ("token-mean", "ppo", "gspo"),
          "dapo": ("token-mean", "ppo", "gspo"), "dr_grpo": ("seq-mean-token-sum-norm", "ppo", "gspo"),
          "cispo": ("token-mean", "cispo", None), "sapo": ("seq-mean-token-mean", "sapo", None),
          "luspo": ("seq-mean-token-sum", None, "luspo"), "vespo": ("token-mean", "vespo", "vespo")}
#: the fields each estimator takes from GRPOConfig
FIELDS = {
    "ppo": {"eps_low": "epsilon", "eps_high": "epsilon_high", "dual_clip": "delta"},
    "gspo": {"eps_low": "epsilon", "eps_high": "epsilon_high"}, "luspo": {"eps_low": "epsilon", "eps_high": "epsilon_high"},
    "cispo": {"eps_high": "epsilon_high"},
    "sapo": {"tau_pos": "sapo_temperature_pos", "tau_neg": "sapo_temperature_neg"},
    "vespo": {"k_pos": "vespo_k_pos", "lambda_pos": "vespo_lambda_pos", "k_neg": "vespo_k_neg",
              "lambda_neg": "vespo_lambda_neg"},
}
#: TRL's cispo caps the ratio itself at epsilon_high (no lower clip); ours clips at 1 + ε_h
SHIFTS = {("cispo", "eps_high"): (-1.0, "TRL caps the ratio at epsilon_high = 1 + eps_high; no lower clip")}
FIXED = {"cispo": {"eps_low": float("inf")}}
SCALE = {"group": "grpo", True: "grpo", "none": "dr_grpo", False: "dr_grpo"}  # scale_rewards → advantage

DEFAULTS = {
    "loss_type": "dapo", "epsilon": 0.2, "epsilon_high": None, "delta": None, "importance_sampling_level": "token",
    "scale_rewards": "group", "num_generations": 8, "num_iterations": 1, "steps_per_generation": None,
    "gradient_accumulation_steps": 1, "generation_batch_size": None, "per_device_train_batch_size": 8, "use_vllm": False, "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask", "vllm_importance_sampling_clip_max": 3.0,
    "vllm_importance_sampling_clip_min": None, "vllm_importance_sampling_cap": None, "top_p": 1.0, "top_k": 0,
    "off_policy_mask_threshold": None, "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05,
    "vespo_k_pos": 2.0, "vespo_lambda_pos": 3.0, "vespo_k_neg": 3.0, "vespo_lambda_neg": 2.0,
}
INERT = {
    "temperature": "the trainer scores at the same temperature, so it changes no ratio (the sandbox's policy is its "
                   "own temperature-1 policy)",
    "mask_truncated_completions": "the sandbox's answers have a fixed length: none is truncated",
    "max_completion_length": "the sandbox's answers have a fixed length (dr_grpo's constant is its padded length)",
    "use_bias_correction_kl": "read only with beta > 0",
    "reward_funcs": "the reward is the sandbox task's own (open-r1's GRPOScriptArguments: the run's reward functions)",
    "reward_weights": "with multi_objective_aggregation 'sum_then_normalize' the weights only combine the run's reward "
                      "functions into one reward before the advantage; the sandbox's reward is its task's own",
    "sync_ref_model": "read only with beta > 0", "ref_model_mixup_alpha": "read only with beta > 0",
    "ref_model_sync_steps": "read only with beta > 0", "entropy_coef_min": "read only with an entropy bonus",
    "entropy_coef_max": "read only with an entropy bonus", "entropy_coef_delta": "read only with an entropy bonus",
    "entropy_target": "read only with an entropy bonus", "vllm_mode": "where vLLM runs changes no number here",
    "per_device_train_batch_size": "read only with generation_batch_size (steps_per_generation = generation_batch_size "
                                   "÷ per_device_train_batch_size, one process)",
    "cast_lm_head_to_fp32": "the learner's precision: the sandbox's learner is fp32 (a sampler mismatch is "
                            "--precision)",
}
REFUSED = {
    "beta": ((0, 0.0), "a KL penalty to a reference model is not modelled (the sandbox has no reference model; "
                       "kl_coef penalises the distance to μ)"),
    "entropy_coef": ((0, 0.0), "an entropy bonus is not modelled"),
    "use_adaptive_entropy": ((False,), "an entropy bonus is not modelled"),
    "top_entropy_quantile": ((1, 1.0), "masking tokens by entropy is not modelled"),
    "min_p": ((None,), "min-p sampling is not modelled (top-p and top-k are)"),
    "repetition_penalty": ((1, 1.0), "a repetition penalty is not modelled"),
    "generation_kwargs": ((None, {}), "extra sampling arguments are not modelled"),
    "multi_objective_aggregation": (("sum_then_normalize",), "normalising each reward function before the sum "
                                                             "(GDPO) is not modelled"),
    "load_in_8bit": ((False,), "a quantised learner is not modelled (TRL's ModelConfig)"),
    "load_in_4bit": ((False,), "a quantised learner is not modelled (TRL's ModelConfig)"),
    "use_liger_kernel": ((False,), "Liger's fused GRPO loss was not run beside ours (tests/conformance runs "
                                   "_compute_loss)"),
}
INFRASTRUCTURE = (
    "output_dir", "overwrite_output_dir", "run_name", "logging_*", "log_*", "save_*", "eval_*", "evaluation_strategy",
    "report_to", "push_to_hub", "hub_*", "seed", "data_seed", "bf16", "fp16", "tf32", "gradient_checkpointing*",
    "per_device_*", "num_train_epochs", "max_steps", "learning_rate", "lr_scheduler_*", "warmup_*", "weight_decay",
    "adam_*", "optim", "optim_args", "max_grad_norm", "dataloader_*", "remove_unused_columns", "model_init_kwargs",
    "trust_remote_code", "disable_dropout", "shuffle_dataset", "pad_to_multiple_of", "ds3_gather_for_generation",
    "num_generations_eval", "cache_implementation", "chat_template_kwargs",
    "vllm_model_impl", "vllm_enable_sleep_mode", "vllm_server_*", "vllm_group_port", "vllm_gpu_memory_utilization",
    "vllm_max_model_length", "vllm_tensor_parallel_size", "vllm_structured_outputs_regex", "use_transformers_*",
    "transformers_continuous_batching_config", "num_completions_to_print", "router_aux_loss_coef",
    "max_prompt_length", "max_tool_calling_iterations", "model_name_or_path", "dataset_*", "torch_dtype", "dtype",
    "use_peft", "lora_*", "attn_implementation", "deepspeed", "fsdp*", "ddp_*", "local_rank", "accelerator_config",
    "parallelism_config", "do_train", "do_eval", "do_predict", "resume_from_checkpoint", "torch_compile*",
    # the rest of transformers' TrainingArguments (5.x): evaluation, checkpoints, logging, memory, devices
    "optim_target_modules", "average_tokens_across_devices", "label_smoothing_factor", "bf16_full_eval",
    "fp16_full_eval", "activation_checkpointing*", "liger_kernel_config", "use_cache", "neftune_noise_alpha",
    "torch_empty_cache_steps", "auto_find_batch_size", "include_num_input_tokens_seen", "disable_tqdm", "project",
    "trackio_*", "prediction_loss_only", "include_for_metrics", "batch_eval_metrics", "enable_jit_checkpoint",
    "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "ignore_data_skip",
    "restore_callback_states_from_checkpoint", "full_determinism", "use_cpu", "label_names",
    "train_sampling_strategy", "length_column_name", "debug", "skip_memory_metrics",
    # TRL's ModelConfig and ScriptArguments, parsed beside GRPOConfig by TrlParser (trl/scripts/utils.py)
    "model_revision", "use_rslora", "use_dora", "bnb_4bit_*", "use_bnb_nested_quant", "ignore_bias_buffers",
    # open-r1's GRPOScriptArguments (src/open_r1/configs.py): data, prompts, reward-function settings, hub
    "chat_template", "system_prompt", "cosine_*", "repetition_n_grams", "repetition_max_penalty", "code_*",
    "parallel_code_exec_per_proc", "e2b_router_url", "morph_router_url", "enforce_same_language", "max_completion_len",
    "soft_punish_cache", "hub_model_revision", "overwrite_hub_revision", "push_to_hub_revision", "wandb_*",
    "callbacks", "benchmarks",
)
VERSION = "TRL 1.16.0 (GRPOConfig, GRPOTrainer)"


def _estimator(s: Settings) -> tuple[str, dict]:
    loss, level = s["loss_type"], s["importance_sampling_level"]
    if loss not in LOSSES:
        s.refuse("loss_type", f"not a loss the check models (known: {', '.join(LOSSES)})")
    if level not in ("token", "sequence"):
        s.refuse("importance_sampling_level", "'token' or 'sequence' is modelled")
    aggregation, token_est, seq_est = LOSSES[loss]
    name = token_est if level == "token" else seq_est
    if name is None:
        s.refuse("importance_sampling_level", f"loss_type={loss!r} at this level is not modelled (TRL: "
                                              f"{'luspo needs sequence' if loss == 'luspo' else 'a token-level loss'})")
    s.map("loss_type × importance_sampling_level", "estimator", name)
    if name == "cispo" and (s["epsilon_high"] if s["epsilon_high"] is not None else s["epsilon"]) < 1:
        s.refuse("epsilon_high", "with loss_type='cispo' TRL caps the IS weight at epsilon_high itself, below 1 "
                                 "here (the ScaleRL value is 5.0)")
    kwargs = {ours: s.map("loss_type", f"{name}.{ours}", value, note=f"TRL's {name}")
              for ours, value in FIXED.get(name, {}).items()}
    for ours, theirs in FIELDS[name].items():
        shift, note = SHIFTS.get((name, ours), (0.0, ""))
        if theirs == "epsilon_high" and s[theirs] is None:
            kwargs[ours] = s.map("epsilon", f"{name}.{ours}", s["epsilon"] + shift,
                                 note="; ".join(n for n in ("epsilon_high is None", note) if n))
        elif theirs == "delta":
            kwargs[ours] = s.map("delta", f"{name}.{ours}", note="" if s["delta"] is not None else
                                 "TRL has no dual clip unless delta is set")
        else:
            kwargs[ours] = s.map(theirs, f"{name}.{ours}", s[theirs] + shift if shift else s[theirs], note=note)
    if s["delta"] is not None and name != "ppo":
        s.refuse("delta", f"two-sided clipping with {name} is not modelled")
    if s["delta"] is not None and not s["delta"] > 1 + kwargs["eps_high"]:
        s.refuse("delta", f"TRL's two-sided clip min(r, delta) is a dual clip only above 1 + epsilon_high = "
                          f"{1 + kwargs['eps_high']:g} (TRL recommends delta > 1 + epsilon)")
    kwargs["aggregation"] = s.map("loss_type", f"{name}.aggregation", aggregation)
    if s["off_policy_mask_threshold"] is not None:
        if name != "ppo":
            s.refuse("off_policy_mask_threshold", f"off-policy sequence masking with {name} is not modelled")
        name = s.map("off_policy_mask_threshold", "estimator", "opsm", note="PPO + off-policy sequence masking")
        kwargs["delta"] = s.map("off_policy_mask_threshold", "opsm.delta")
    return name, kwargs


def _correction(s: Settings, name: str, kwargs: dict) -> None:
    """The vLLM importance-sampling correction (only with use_vllm) as the ``rollout_is`` fields."""
    if not (s["use_vllm"] and s["vllm_importance_sampling_correction"]):
        s.map("use_vllm × vllm_importance_sampling_correction", f"{name}.rollout_is", None,
              note="no engine log-probs without vLLM" if not s["use_vllm"] else "")
        return
    if name == "vespo":
        s.refuse("vllm_importance_sampling_correction", "vespo folds the vLLM ratio into its sequence weight, "
                                                        "which is not modelled")
    if name == "gspo" and str(s["vllm_importance_sampling_mode"]).startswith("token"):
        s.refuse("vllm_importance_sampling_mode", "token weights with a sequence-level ratio: TRL multiplies its one "
                                                  "ratio per answer by each token's weight, so every token's gradient "
                                                  "gets the answer's mean weight; ours (and verl) weight each token's "
                                                  "own — use a sequence_* mode")
    cap = s["vllm_importance_sampling_cap"]
    kwargs["rollout_is"] = s.map("use_vllm × vllm_importance_sampling_correction × vllm_importance_sampling_mode",
                                 f"{name}.rollout_is", s["vllm_importance_sampling_mode"])
    key = "vllm_importance_sampling_cap" if cap is not None else "vllm_importance_sampling_clip_max"
    top = s[key]
    if str(s["vllm_importance_sampling_mode"]).endswith("truncate") and top is None \
            and s["vllm_importance_sampling_clip_min"] is None:
        s.refuse(key, "a *_truncate mode without vllm_importance_sampling_clip_min or _clip_max: GRPOConfig refuses "
                      "it (TRL 1.16.0, grpo_config.py __post_init__)")
    kwargs["rollout_is_max"] = s.map(key, f"{name}.rollout_is_max", float("inf") if top is None else top)
    if s["vllm_importance_sampling_clip_min"] is not None:
        kwargs["rollout_is_min"] = s.map("vllm_importance_sampling_clip_min", f"{name}.rollout_is_min")
    # _generate_and_score_completions logs them with the correction (sandbox.estimators.trl_metrics)
    kwargs["trl_metrics"] = s.map("use_vllm × vllm_importance_sampling_correction", f"{name}.trl_metrics", "grpo",
                                  note="the run logs TRL's sampling/* as TRL 1.16.0 computes them: the recomputed "
                                       "π_old against vLLM's μ, of this weight; TRL sets no alarm on them")
    s.logs += list(TRL_METRICS)


def _reuse(s: Settings) -> int:
    """Optimiser updates per generation batch: num_iterations × steps_per_generation ÷
    gradient_accumulation_steps, steps_per_generation derived as GRPOConfig does from
    generation_batch_size ÷ (per_device_train_batch_size × processes) — one process assumed (a
    GRPOConfig object carries both, consistent)."""
    ga, spg, gbs, per_device = (s[k] for k in ("gradient_accumulation_steps", "steps_per_generation",
                                                "generation_batch_size", "per_device_train_batch_size"))
    keys = "num_iterations × steps_per_generation ÷ gradient_accumulation_steps"
    note = ""
    if gbs is not None:
        if gbs % per_device:
            s.refuse("generation_batch_size", f"must be divisible by per_device_train_batch_size ({per_device}) × "
                                              "processes (TRL's own check; one process assumed)")
        if spg is not None and spg != gbs // per_device:
            s.refuse("steps_per_generation", "and generation_batch_size cannot both be configured (TRL)")
        spg = gbs // per_device
        keys = "num_iterations × generation_batch_size ÷ per_device_train_batch_size ÷ gradient_accumulation_steps"
        note = "one process assumed: steps_per_generation = generation_batch_size ÷ per_device_train_batch_size"
        if s.given("steps_per_generation"):
            s.inert("steps_per_generation", "consistent with generation_batch_size")
    return s.map(keys, "deployment.reuse", s["num_iterations"] * max(1, (spg or ga) // ga), note=note)


def derive(s: Settings) -> tuple[dict, Deployment]:
    name, kwargs = _estimator(s)
    _correction(s, name, kwargs)
    scale = s["scale_rewards"]
    if scale not in SCALE:
        s.refuse("scale_rewards", "'group' or 'none' is modelled (batch std scaling is not)")
    advantage = s.map("scale_rewards", "advantage", SCALE[scale])
    adv_kwargs = {"eps": s.map("scale_rewards", "advantage_kwargs.eps", 1e-4, note="TRL's")} \
        if advantage == "grpo" else {}
    reuse = _reuse(s)
    s.map("(GRPOTrainer old_per_token_logps)", "deployment.proximal", "recompute",
          note="TRL recomputes π_old in the trainer")
    vllm = s["use_vllm"]
    deployment = Deployment(group=s.map("num_generations", "deployment.group"),
                            top_p=float(s.map("top_p", "deployment.top_p")), top_k=s.map("top_k", "deployment.top_k"),
                            report=s.map("use_vllm", "deployment.report", "truncated" if vllm else "full",
                                         note="TRL starts vLLM with logprobs_mode='processed_logprobs': the "
                                              "truncated distribution's" if vllm else
                                              "the trainer's own full-softmax log-probs"),
                            reuse=reuse, proximal="recompute")
    return {"estimator": name, "estimator_kwargs": kwargs, "advantage": advantage, "advantage_kwargs": adv_kwargs}, \
        deployment


#: ranges and types beyond the defaults' types (GRPOConfig's own checks, or what the mapping needs)
SPECS = {
    "num_generations": Spec("int", low=2), "num_iterations": Spec("int", low=1),
    "steps_per_generation": Spec("int", low=1, none=True), "gradient_accumulation_steps": Spec("int", low=1),
    "generation_batch_size": Spec("int", low=1, none=True), "per_device_train_batch_size": Spec("int", low=1),
    "top_p": Spec("number", low=0.0, high=1.0, low_open=True), "top_k": Spec("int", low=0),
    "epsilon": Spec("number", low=0.0), "epsilon_high": Spec("number", low=0.0, none=True, finite=False),
    "delta": Spec("number", low=1.0, low_open=True, none=True), "loss_type": Spec("str"),
    "vllm_importance_sampling_clip_max": Spec("number", low=0.0, low_open=True, none=True, finite=False),
    "vllm_importance_sampling_clip_min": Spec("number", low=0.0, none=True),
    "vllm_importance_sampling_cap": Spec("number", low=0.0, low_open=True, none=True, finite=False),
    "off_policy_mask_threshold": Spec("number", low=0.0, none=True, finite=False),
    "scale_rewards": Spec("any"), "sapo_temperature_pos": Spec("number", low=0.0, low_open=True),
    "sapo_temperature_neg": Spec("number", low=0.0, low_open=True),
}
#: what a TRL user can select instead: each loss_type at the level TRL runs it (cispo with the ScaleRL
#: cap 5.0 its docs give, which it needs above 1), GSPO's sequence level
ALTERNATIVES = (*({"loss_type": t, "importance_sampling_level": "token"} for t in ("grpo", "bnpo", "dapo", "dr_grpo",
                                                                                  "sapo", "vespo")),
                {"loss_type": "cispo", "importance_sampling_level": "token", "epsilon_high": 5.0},
                {"loss_type": "grpo", "importance_sampling_level": "sequence"},
                {"loss_type": "luspo", "importance_sampling_level": "sequence"})
SCHEMA = Schema("trl", VERSION, DEFAULTS, INERT, REFUSED, INFRASTRUCTURE, derive, SPECS, ALTERNATIVES)
VERSIONS = {"1.16.0": SCHEMA}
