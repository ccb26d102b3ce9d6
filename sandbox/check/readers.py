"""Reading the configurations people have into one flat form: ``{dotted key: value}``.

- a verl trainer config: YAML, nested or with Hydra-style dotted keys (``actor_rollout_ref.actor.
  clip_ratio_high: 0.28``), or a YAML list of Hydra overrides (``- algorithm.adv_estimator=grpo``;
  the ``+``/``++`` prefixes are dropped); a whole-value interpolation ``${a.b}`` or
  ``${oc.select:a.b,default}`` is resolved against the same file;
- a TRL ``GRPOConfig``: YAML or JSON, or the dataclass object itself (read through
  ``dataclasses.fields``: TRL need not be installed);
- a dict in either form.

The source is told by the keys: verl's roots (``actor_rollout_ref``, ``algorithm``, …) or TRL's
``GRPOConfig`` fields. Anything else is a one-line ``ValueError`` naming the config.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

#: top-level sections of a verl trainer config (ppo_trainer.yaml, fully_async_ppo_trainer.yaml)
VERL_ROOTS = ("actor_rollout_ref", "algorithm", "data", "trainer", "critic", "reward_model", "async_training",
              "rollout", "custom_reward_function", "ray_kwargs", "global_profiler", "reward_manager", "hydra",
              "defaults", "transfer_queue", "model_engine")
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
    text = path.read_text()
    try:
        if path.suffix == ".json":
            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except Exception as err:  # a malformed file is bad input: one line
        detail = " ".join(str(err).split())[:200]
        raise ValueError(f"config file {str(path)!r} does not parse: {type(err).__name__}: {detail}") from None


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; dotted keys and nesting may mix. Hydra's ``+``/``++``
    prefixes are dropped; lists and scalars are values."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = prefix + str(key).lstrip("+")
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _overrides(items: list) -> dict[str, Any]:
    """``["key=value", …]`` (Hydra overrides) to a dict; values parse as YAML scalars."""
    import yaml

    out = {}
    for item in items:
        if not (isinstance(item, str) and "=" in item):
            raise ValueError(f"config: a list config must hold Hydra overrides 'key=value', got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip().lstrip("+")] = yaml.safe_load(value) if value.strip() else None
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
            import yaml

            out[key] = yaml.safe_load(match.group(2))
    return out


def _source(flat: dict[str, Any]) -> str:
    roots = {key.split(".")[0] for key in flat}
    if roots & set(VERL_ROOTS):
        return "verl"
    if roots & set(TRL_MARKERS):
        return "trl"
    raise ValueError("config is neither a verl trainer config (keys under actor_rollout_ref., algorithm., …) nor a "
                     f"TRL GRPOConfig (loss_type, num_generations, …); its keys: {sorted(flat)[:8]}")
