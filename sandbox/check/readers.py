"""Reading the configurations people have into one flat form: ``{dotted key: value}``.

- a verl trainer config: YAML, nested or with Hydra-style dotted keys (``actor_rollout_ref.actor.
  clip_ratio_high: 0.28``), or a YAML list of Hydra overrides (``- algorithm.adv_estimator=grpo``),
  read with OmegaConf's YAML loader and Hydra's override parser and resolved by OmegaConf
  (``sandbox.check.loaders``: interpolations, merge keys, aliases, bounded depth and size);
- a TRL ``GRPOConfig`` (or ``AsyncGRPOConfig``): YAML or JSON, or the dataclass object itself (read
  through ``dataclasses.fields``: TRL need not be installed); its fields are flat, so a dict value
  (``chat_template_kwargs``, ``model_init_kwargs``) is the field's value, not more keys;
- a dict in either form.

The source is told by the keys: verl's roots (``actor_rollout_ref``, ``algorithm``, …) or TRL's
``GRPOConfig`` fields. A config of a framework the check does not read — AReaL, OpenRLHF (its
pre-0.9 flat flags and its 0.9+ dotted ones), SkyRL, prime-rl (TOML) — is refused by name, saying
which of its settings would matter, as is anything else, in one ``ValueError`` line.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from sandbox.check.loaders import apply_overrides, load_yaml, resolve
from sandbox.core.validation import unique_pairs

#: top-level sections of a verl trainer config (ppo_trainer.yaml, fully_async_ppo_trainer.yaml)
VERL_ROOTS = ("actor_rollout_ref", "algorithm", "data", "trainer", "critic", "reward_model", "async_training",
              "rollout", "custom_reward_function", "ray_kwargs", "global_profiler", "reward_manager", "hydra",
              "defaults", "transfer_queue", "model_engine")
#: top-level keys only an AReaL config has (areal/api/cli_args.py: experiment_name, allocation_mode,
#: gconfig, a top-level actor, …)
AREAL_ROOTS = ("allocation_mode", "gconfig", "actor", "experiment_name", "trial_name", "sglang", "saver",
               "checkpointer", "stats_logger", "cluster", "total_train_epochs")
#: options only OpenRLHF's ``train_ppo_ray`` takes, before 0.9 (openrlhf/cli/train_ppo_ray.py)
OPENRLHF_KEYS = ("n_samples_per_prompt", "advantage_estimator", "init_kl_coef", "actor_learning_rate",
                 "micro_train_batch_size", "micro_rollout_batch_size", "rollout_batch_size", "vllm_num_engines",
                 "eps_clip", "eps_clip_low_high", "zero_stage", "colocate_all_models", "reward_pretrain",
                 "actor_num_nodes", "ref_num_nodes")
#: sections of OpenRLHF ≥ 0.9's dotted command line (``--algo.advantage.estimator``, ``--vllm.num_engines``)
OPENRLHF_SECTIONS = ("algo", "vllm", "ds", "ckpt")
#: sections only SkyRL's config has (skyrl_train/config/ppo_base_config.yaml: generator, environment,
#: trainer.algorithm)
SKYRL_SECTIONS = ("generator", "environment")
#: prime-rl's TOML sections (orchestrator, inference, deployment)
PRIMERL_SECTIONS = ("orchestrator", "inference", "deployment")
#: GRPOConfig / AsyncGRPOConfig fields that only a TRL config has (any one tells the source)
TRL_MARKERS = ("loss_type", "num_generations", "epsilon", "epsilon_high", "beta", "importance_sampling_level",
               "scale_rewards", "num_iterations", "vllm_importance_sampling_correction", "use_vllm",
               "mask_truncated_completions", "max_completion_length", "use_adaptive_entropy", "entropy_coef",
               "reward_funcs", "max_staleness", "chat_template_kwargs")
SUFFIXES = (".yaml", ".yml", ".json", ".toml")


def read_config(config: Any) -> tuple[str, dict[str, Any], str]:
    """``(source, flat, label)``: 'verl' or 'trl', the flat ``{dotted key: value}`` and a label
    (the file's stem, the dataclass's name, or 'config')."""
    if isinstance(config, (str, Path)):
        path = Path(config)
        if path.suffix not in SUFFIXES:
            raise ValueError(f"config must be a {'/'.join(SUFFIXES)} file, a dict or a GRPOConfig object, got {str(config)!r}")
        if not path.is_file():
            raise ValueError(f"config file {str(path)!r} does not exist")
        data, label = _load(path), path.stem
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        data, label = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}, type(config).__name__
    elif isinstance(config, dict):
        data, label = config, "config"
    else:
        raise ValueError(f"config must be a file path, a dict or a GRPOConfig object, got {type(config).__name__}")
    order = None
    if isinstance(data, list):  # the overrides' order, for the table
        order = [str(item).split("=", 1)[0].lstrip("+~") for item in data]
        data = apply_overrides(data)
    if not isinstance(data, dict):
        raise ValueError(f"config must hold a mapping of settings, got {type(data).__name__}")
    source = _source(data)
    if source == "trl":  # GRPOConfig's fields are flat: a dict value is the field's value
        return source, {str(k): v for k, v in data.items()}, label
    flat = flatten(resolve(nest(data)))
    order = {key.lstrip("+"): i for i, key in reversed(list(enumerate(order or flatten(data))))}
    return source, dict(sorted(flat.items(), key=lambda kv: order.get(kv[0], len(order)))), label


def _load(path: Path) -> Any:
    try:
        text = path.read_text()
        if path.suffix == ".json":
            return json.loads(text, object_pairs_hook=_unique_pairs)
        if path.suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                raise ValueError("config is TOML, which the check reads on Python ≥ 3.11") from None
            return tomllib.loads(text)
        return load_yaml(text)
    except ValueError as err:
        if str(err).startswith("config "):
            raise ValueError(f"config file {str(path)!r}: {str(err)[len('config '):]}") from None
        detail = " ".join(str(err).split())[:200]
        raise ValueError(f"config file {str(path)!r} does not parse: {type(err).__name__}: {detail}") from None
    except Exception as err:  # a malformed file is bad input: one line
        detail = " ".join(str(err).split())[:200]
        raise ValueError(f"config file {str(path)!r} does not parse: {type(err).__name__}: {detail}") from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    return unique_pairs(pairs, lambda key: ValueError(
        f"config sets key {key!r} twice in one mapping (verl's loader refuses this)"))


def yaml_load(text: str) -> Any:
    """A YAML text as OmegaConf's loader reads it, bounded (``sandbox.check.loaders.load_yaml``)."""
    return load_yaml(text)


def nest(data: dict) -> dict:
    """Dotted keys to nesting (``a.b: 1`` → ``a: {b: 1}``), as Hydra reads a dotted override;
    Hydra's ``+``/``++`` prefixes dropped; a key set both nested and dotted is refused."""
    out: dict = {}
    for key, value in data.items():
        parts = str(key).lstrip("+").split(".")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"config sets {'.'.join(parts)!r} under {part!r}, which is set to {child!r}; "
                                 "give it once")
            node = child
        value = nest(value) if isinstance(value, dict) else value
        leaf = parts[-1]
        if leaf in node:
            if isinstance(node[leaf], dict) and isinstance(value, dict) and not set(node[leaf]) & set(value):
                node[leaf].update(value)
                continue
            raise ValueError(f"config sets {'.'.join(parts)!r} twice (nested and dotted): {node[leaf]!r} and "
                             f"{value!r}; give it once")
        node[leaf] = value
    return out


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; lists and scalars are values."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = prefix + str(key)
        flat.update(flatten(value, name + ".") if isinstance(value, dict) and value else {name: value})
    return flat


def _refused(name: str, keys: list[str], why: str) -> ValueError:
    return ValueError(f"config is {name} config (keys {', '.join(keys[:4])}): sandbox check reads verl and TRL "
                      f"configs only; {why} (docs/check.md, 'What is left out')")


def _source(data: dict[str, Any]) -> str:
    """'verl' or 'trl' from the keys; another framework's config refused by name."""
    roots = {str(key).lstrip("+").split(".")[0] for key in data}
    dotted = {str(key).lstrip("+") for key in data}
    verl = roots & {"actor_rollout_ref", "algorithm"}
    if roots & set(PRIMERL_SECTIONS) and not verl:
        raise _refused("a prime-rl", sorted(roots & set(PRIMERL_SECTIONS)),
                       "prime-rl's group size (orchestrator.group_size), its async level (max_async_level) and its "
                       "loss (trainer.loss) are not read")
    trainer = data.get("trainer") if isinstance(data.get("trainer"), dict) else {}
    if not verl and (roots & set(SKYRL_SECTIONS) or "algorithm" in trainer
                     or any(k.startswith("trainer.algorithm.") for k in dotted)):
        raise _refused("a SkyRL", sorted(roots & {*SKYRL_SECTIONS, "trainer"}),
                       "SkyRL's loss (trainer.algorithm.policy_loss_type, loss_reduction, eps_clip_low/high), "
                       "advantage (advantage_estimator, grpo_norm_by_std) and group size "
                       "(generator.n_samples_per_prompt) are not read, and its keys are not verl's")
    areal = sorted(roots & set(AREAL_ROOTS))
    if set(areal) - {"actor"} and not verl:  # OpenRLHF ≥ 0.9 has an actor section too
        raise _refused("an AReaL", areal, "AReaL's staleness (rollout.max_head_offpolicyness), group size "
                                          "(gconfig.n_samples) and decoupled loss are not read")
    openrlhf_new = sorted(roots & set(OPENRLHF_SECTIONS))
    if openrlhf_new and not verl:
        raise _refused("an OpenRLHF ≥ 0.9", openrlhf_new,
                       "OpenRLHF's group size (rollout.n_samples_per_prompt), clip (actor.eps_clip_low_high), "
                       "advantage (algo.advantage.estimator) and KL (algo.kl.*) are not read")
    openrlhf = sorted(roots & set(OPENRLHF_KEYS))
    if openrlhf:
        raise _refused("an OpenRLHF (< 0.9)", openrlhf,
                       "OpenRLHF's group size (n_samples_per_prompt), clip and advantage estimator are not read")
    if roots & set(VERL_ROOTS):
        return "verl"
    if roots & set(TRL_MARKERS):
        return "trl"
    raise ValueError("config is neither a verl trainer config (keys under actor_rollout_ref., algorithm., …) nor a "
                     f"TRL GRPOConfig (loss_type, num_generations, …); its keys: {sorted(dotted)[:8]}")
