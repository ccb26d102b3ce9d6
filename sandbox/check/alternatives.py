"""What the user's own framework can select instead (issue 45, item 3): the configuration with one
change of its loss — a verl loss mode or π_old's source, a TRL loss type — mapped through the same
reading (``Schema.alternatives``), each a recipe named by the change a user would make
(``loss_mode=cispo``). A change the check refuses, or one that maps to the configuration's own
recipe, is left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox.check.mapping import PRECISIONS, Mapping, map_config
from sandbox.check.readers import read_config
from sandbox.scoring.recipes import Recipe


def change_text(change: dict[str, Any]) -> str:
    """``{key: value}`` as the user would write it: ``key=value`` (space-separated)."""
    return " ".join(f"{k}={_show(v)}" for k, v in change.items())


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _name(change: dict[str, Any]) -> str:
    return ",".join(f"{k.rsplit('.', 1)[-1]}={_show(v)}" for k, v in change.items())


def _loss(recipe: dict) -> dict:
    """A recipe's loss: its fields without its name and the metrics it logs (``verl_metrics``, ``trl_metrics``)."""
    kwargs = {k: v for k, v in recipe.get("estimator_kwargs", {}).items() if k not in ("verl_metrics", "trl_metrics")}
    return {**{k: v for k, v in recipe.items() if k != "name"}, "estimator_kwargs": kwargs}


def alternatives(config: Any, mapping: Mapping, framework: str | None = None, trainer: str | None = None,
                 ignore: Sequence[str] = ()) -> dict[str, tuple[dict, Recipe]]:
    """``{name: (change, recipe)}``: the config with each of its reading's alternative changes,
    mapped as the config is (same version, trainer, ignored keys and precision cell); a change that
    would move the deployment (π_old's source) is left out — its cells differ."""
    from sandbox.check.frameworks import schema_for, trainer_of

    source, flat, stem = read_config(config)
    chosen = trainer_of(source, flat, stem, trainer)
    schema = schema_for(source, framework, chosen)
    trainer = chosen if source == "trl" else None
    inverse = {dtype: name for name, dtype in PRECISIONS.items()}
    precision = inverse[mapping.deployment.precision]  # the same cells: the config's own precision cell or none
    own = mapping.recipe.to_dict()
    found: dict[str, tuple[dict, Recipe]] = {}
    seen = [_loss(own)]
    for change in schema.alternatives:
        if all(flat.get(k, schema.defaults.get(k)) == v for k, v in change.items()):
            continue
        try:
            other = map_config({**flat, **change}, ignore=[k for k in ignore if k not in change], precision=precision,
                               label=_name(change), framework=framework, trainer=trainer)
        except ValueError:  # refused (or invalid) with the rest of this config: not an option here
            continue
        body = _loss(other.recipe.to_dict())
        if body in seen or other.deployment != mapping.deployment:
            continue  # the same loss, or a change of the deployment (π_old) the cells of this one do not run
        seen.append(body)
        found[other.recipe.name] = (change, other.recipe)
    return found
