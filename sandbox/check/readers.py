"""Reading the configurations people have into one flat form: ``{dotted key: value}``.

- a verl trainer config: YAML, nested or with Hydra-style dotted keys (``actor_rollout_ref.actor.
  clip_ratio_high: 0.28``), or a YAML list of Hydra overrides (``- algorithm.adv_estimator=grpo``;
  the ``+``/``++`` prefixes are dropped); a whole-value interpolation ``${a.b}`` or
  ``${oc.select:a.b,default}`` is resolved against the same file;
- a TRL ``GRPOConfig``: YAML or JSON, or the dataclass object itself (read through
  ``dataclasses.fields``: TRL need not be installed);
- a dict in either form.

The source is told by the keys: verl's roots (``actor_rollout_ref``, ``algorithm``, …) or TRL's
``GRPOConfig`` fields; an AReaL or OpenRLHF config (told by keys only they have) is refused, as is
anything else, in one ``ValueError`` line naming the config.

YAML is read as Hydra/OmegaConf and TRL's parser read it: ``3e-4`` is a float (YAML 1.2; PyYAML's
YAML 1.1 resolver makes it a string), and a key given twice — duplicated in one mapping (OmegaConf
refuses it), nested and dotted at once, or twice in an override list — is refused, naming the key.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from sandbox.core.validation import unique_pairs

#: top-level sections of a verl trainer config (ppo_trainer.yaml, fully_async_ppo_trainer.yaml)
VERL_ROOTS = ("actor_rollout_ref", "algorithm", "data", "trainer", "critic", "reward_model", "async_training",
              "rollout", "custom_reward_function", "ray_kwargs", "global_profiler", "reward_manager", "hydra",
              "defaults", "transfer_queue", "model_engine")
#: top-level keys only an AReaL config has (areal/api/cli_args.py: experiment_name, allocation_mode,
#: gconfig, a top-level actor, …)
AREAL_ROOTS = ("allocation_mode", "gconfig", "actor", "experiment_name", "trial_name", "sglang", "saver",
               "checkpointer", "stats_logger", "cluster", "total_train_epochs")
#: options only OpenRLHF's ``train_ppo_ray`` takes (openrlhf/cli/train_ppo_ray.py)
OPENRLHF_KEYS = ("n_samples_per_prompt", "advantage_estimator", "init_kl_coef", "actor_learning_rate",
                 "micro_train_batch_size", "micro_rollout_batch_size", "rollout_batch_size", "vllm_num_engines",
                 "eps_clip", "eps_clip_low_high", "zero_stage", "colocate_all_models", "reward_pretrain",
                 "actor_num_nodes", "ref_num_nodes")
#: GRPOConfig fields that only a TRL config has (any one tells the source)
TRL_MARKERS = ("loss_type", "num_generations", "epsilon", "epsilon_high", "beta", "importance_sampling_level",
               "scale_rewards", "num_iterations", "vllm_importance_sampling_correction", "use_vllm",
               "mask_truncated_completions", "max_completion_length")
SUFFIXES = (".yaml", ".yml", ".json")
_INTERPOLATION = re.compile(r"^\$\{(?:oc\.select:)?([\w.]+)(?:,(.*))?\}$")


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
    if isinstance(data, list):
        data = _overrides(data)
    if not isinstance(data, dict):
        raise ValueError(f"config must hold a mapping of settings, got {type(data).__name__}")
    flat = _resolve(flatten(data))
    return _source(flat), flat, label


def _load(path: Path) -> Any:
    try:
        text = path.read_text()
        if path.suffix == ".json":
            return json.loads(text, object_pairs_hook=_unique_pairs)
        return yaml_load(text)
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


def _loader():
    """A YAML SafeLoader that reads floats as YAML 1.2 (``3e-4``, ``1e5``: floats, as Hydra and TRL read
    them) and refuses a key given twice in one mapping (OmegaConf raises on it)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            self.flatten_mapping(node)
            keys = [self.construct_object(k, deep=True) for k, _ in node.value]
            twice = sorted({str(k) for k in keys if keys.count(k) > 1})
            if twice:
                raise ValueError(f"config sets key {twice[0]!r} twice in one mapping (verl's loader refuses this)")
            return super().construct_mapping(node, deep)

    Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    return Loader


_FLOAT = re.compile(r"^[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)|\.\d+(?:[eE][-+]?\d+)?)$")


def yaml_load(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; dotted keys and nesting may mix. Hydra's ``+``/``++``
    prefixes are dropped; lists and scalars are values."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = prefix + str(key).lstrip("+")
        items = flatten(value, name + ".") if isinstance(value, dict) and value else {name: value}
        for k, v in items.items():
            if k in flat:
                raise ValueError(f"config sets {k!r} twice (nested and dotted): {flat[k]!r} and {v!r}; "
                                 "give it once")
            flat[k] = v
    return flat


def _overrides(items: list) -> dict[str, Any]:
    """``["key=value", …]`` (Hydra overrides) to a dict; values parse as YAML scalars."""
    out = {}
    for item in items:
        if not (isinstance(item, str) and "=" in item):
            raise ValueError(f"config: a list config must hold Hydra overrides 'key=value', got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip().lstrip("+")
        if key in out:
            raise ValueError(f"config sets {key!r} twice in its overrides; give it once")
        out[key] = yaml_load(value) if value.strip() else None
    return out


def _resolve(flat: dict[str, Any]) -> dict[str, Any]:
    """Whole-value interpolations ``${a.b}`` / ``${oc.select:a.b,default}`` to the value they name
    (a key this file does not set keeps its default: the key is dropped, so the reader's default
    applies; ``default`` when given)."""
    out = {}
    for key, value in flat.items():
        match = _INTERPOLATION.match(value) if isinstance(value, str) else None
        if match is None:
            out[key] = value
        elif match.group(1) in flat and not _INTERPOLATION.match(str(flat[match.group(1)])):
            out[key] = flat[match.group(1)]
        elif match.group(2) is not None:
            out[key] = yaml_load(match.group(2))
    return out


def _source(flat: dict[str, Any]) -> str:
    roots = {key.split(".")[0] for key in flat}
    areal, openrlhf = sorted(roots & set(AREAL_ROOTS)), sorted(roots & set(OPENRLHF_KEYS))
    if areal and not roots & {"actor_rollout_ref", "algorithm"}:
        raise ValueError(f"config is an AReaL config (keys {', '.join(areal[:4])}): sandbox check reads verl and TRL "
                         "configs only; AReaL's staleness (rollout.max_head_offpolicyness), group size "
                         "(gconfig.n_samples) and decoupled loss are not read (docs/check.md, 'What is left out')")
    if openrlhf:
        raise ValueError(f"config is an OpenRLHF config (keys {', '.join(openrlhf[:4])}): sandbox check reads verl "
                         "and TRL configs only; OpenRLHF's group size (n_samples_per_prompt), clip and advantage "
                         "estimator are not read (docs/check.md, 'What is left out')")
    if roots & set(VERL_ROOTS):
        return "verl"
    if roots & set(TRL_MARKERS):
        return "trl"
    raise ValueError("config is neither a verl trainer config (keys under actor_rollout_ref., algorithm., …) nor a "
                     f"TRL GRPOConfig (loss_type, num_generations, …); its keys: {sorted(flat)[:8]}")
