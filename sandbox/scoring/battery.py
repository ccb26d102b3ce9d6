"""Batteries: named, versioned lists of cells (environment × friction × strength), each with a
fixed budget and a score in [0, 1].

A battery is data (a dict in ``sandbox/scoring/batteries/NAME.py``, named by a ``sandbox.batteries``
entry point in pyproject.toml, where an installed distribution can add its own): environment defaults
(``envs``: kind, seeds, metric, the random policy's and the best value, base run fields) and cells
that override them. ``extends`` starts from another battery (environment settings merge key by
key, cells are appended). Its hash is the sha256 of the resolved definition without its version;
``batteries/versions.py`` records the hash of every released version, and a test fails when a
definition changes without a version bump.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field

from sandbox.core.plugins import entry_points_of
from sandbox.runtime.config import _freeze

KINDS = ("probe", "train")
#: friction categories (one scorecard panel each); "inference engine": truncated sampling, partial
#: rollouts and admission, the frictions of real LLM inference engines (docs/environments.md, "Frictions of real
#: inference engines"); "deployment": a run's frictions all at once and its friction-free control
#: (``sandbox check``'s deployment battery)
FRICTIONS = ("staleness", "actor bug", "reward corruption", "rare discovery", "all four", "inference engine",
             "deployment")
CELL_KEYS = {"name", "env", "friction", "run", "probe", "async", "seeds"}
ENV_KEYS = {"kind", "seeds", "metric", "random", "best", "run", "probe", "batched"}


@dataclass(frozen=True)
class Cell:
    """One environment × friction × strength with its budget. ``run``: RunConfig fields (train
    cells, seeds excluded); ``probe``: the exact probe's settings; ``random``/``best``: the metric's
    value for a uniform policy and the environment's best, so that score = (random − m)/(random − best)
    clipped to [0, 1] (probes report a fraction in [0, 1] directly)."""

    name: str
    env: str
    friction: str
    kind: str
    seeds: int
    metric: str
    random: float
    best: float
    run: dict = field(default_factory=dict)
    probe: dict = field(default_factory=dict)
    async_config: dict | None = None  # train on Ray (sandbox.runtime.ray_async) with these settings
    batched: bool = True  # seeds as one population (False: one run per seed, population 1)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"cell {self.name!r}: kind must be one of {list(KINDS)}, got {self.kind!r}")
        if self.friction not in FRICTIONS:
            raise ValueError(f"cell {self.name!r}: friction must be one of {list(FRICTIONS)}, got {self.friction!r}")
        if not (isinstance(self.seeds, int) and self.seeds >= 1):
            raise ValueError(f"cell {self.name!r}: seeds must be an integer ≥ 1, got {self.seeds!r}")
        if self.random == self.best:
            raise ValueError(f"cell {self.name!r}: random and best must differ, got {self.random}")

    def normalise(self, value: float) -> float:
        """(random − value)/(random − best), clipped to [0, 1]; NaN (a diverged run) scores 0."""
        if value != value:
            return 0.0
        return min(1.0, max(0.0, (self.random - value) / (self.random - self.best)))

    def to_dict(self) -> dict:
        return _freeze({k: getattr(self, k) for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class Battery:
    name: str
    version: int
    description: str
    seed: int
    cells: tuple[Cell, ...]
    definition: dict  # the resolved data, version included

    @property
    def hash(self) -> str:
        return definition_hash(self.definition)

    def with_seeds(self, seeds: int | None) -> Battery:
        """The battery with every cell's seed count replaced (``None``: unchanged)."""
        if seeds is None:
            return self
        if not (isinstance(seeds, int) and seeds >= 1):
            raise ValueError(f"seeds must be an integer ≥ 1, got {seeds!r}")
        cells = tuple(Cell(**{**c.__dict__, "seeds": seeds}) for c in self.cells)
        return Battery(self.name, self.version, self.description, self.seed, cells, self.definition)

    def describe(self) -> str:
        lines = [f"{self.name} v{self.version} ({len(self.cells)} cells, hash {self.hash[:12]}): {self.description}"]
        width = max((len(c.name) for c in self.cells), default=0) + 1
        for c in self.cells:
            budget = f"{c.run.get('steps')} steps" if c.kind == "train" else "exact"
            extra = {k: v for k, v in {**c.run, **c.probe, **(c.async_config or {})}.items()
                     if k in ("staleness", "frictions", "p_correct", "actor", "rho", "p_actor",
                              "proximal")}
            lines.append(f"  {c.name:<{width}} {c.friction:<18} {c.seeds:>3} seeds  {budget:<11} {json.dumps(extra)}")
        return "\n".join(lines)


def definition_hash(definition: dict) -> str:
    """sha256 of the canonical JSON of a resolved definition without its ``version``."""
    payload = {k: v for k, v in definition.items() if k != "version"}
    return hashlib.sha256(json.dumps(_freeze(payload), sort_keys=True).encode()).hexdigest()


def battery_names() -> list[str]:
    """The packaged batteries: the ``sandbox.batteries`` entry points (pyproject.toml)."""
    return list(entry_points_of("sandbox.batteries"))


def _merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


def resolve(data: dict, lookup=None) -> dict:
    """The full definition of ``data``: its ``extends`` chain merged in (``lookup(name)`` gives the
    raw data of another battery; default: the packaged ones)."""
    lookup = lookup or _raw
    data = copy.deepcopy(data)
    parent_name = data.pop("extends", None)
    if parent_name is None:
        return data
    parent = resolve(lookup(parent_name), lookup)
    envs = _merge(parent.get("envs", {}), data.pop("envs", {}))
    cells = parent.get("cells", []) + data.pop("cells", [])
    merged = {**{k: v for k, v in parent.items() if k not in ("envs", "cells")}, **data}
    return {**merged, "envs": envs, "cells": cells, "extends": parent_name}


def _raw(name: str) -> dict:
    if name not in battery_names():
        raise ValueError(f"unknown battery {name!r}; known: {battery_names()}")
    return entry_points_of("sandbox.batteries")[name].load()


def build(data: dict, lookup=None) -> Battery:
    """A ``Battery`` from its data (resolved against ``extends``); every cell is validated."""
    for key in ("name", "version", "cells"):
        if key not in data:
            raise ValueError(f"battery data needs {key!r}; got keys {sorted(data)}")
    definition = resolve(data, lookup)
    if not definition["cells"]:
        raise ValueError(f"battery {data['name']!r}: cells is empty; a battery needs at least one cell")
    envs = definition.get("envs", {})
    cells, names = [], set()
    for raw in definition["cells"]:
        unknown = set(raw) - CELL_KEYS
        if unknown or "env" not in raw or "name" not in raw:
            raise ValueError(f"battery {data['name']!r}: a cell needs 'name' and 'env' and takes only "
                             f"{sorted(CELL_KEYS)}; got {sorted(raw)}")
        if raw["env"] not in envs:
            raise ValueError(f"cell {raw['name']!r}: env must be one of {sorted(envs)}, got {raw['env']!r}")
        env = envs[raw["env"]]
        if set(env) - ENV_KEYS:
            raise ValueError(f"env {raw['env']!r} takes only {sorted(ENV_KEYS)}; got {sorted(env)}")
        if raw["name"] in names:
            raise ValueError(f"battery {data['name']!r}: cell name {raw['name']!r} appears twice")
        names.add(raw["name"])
        cells.append(Cell(name=raw["name"], env=raw["env"], friction=raw.get("friction", ""), kind=env["kind"],
                          seeds=raw.get("seeds", env["seeds"]), metric=env["metric"], random=float(env["random"]),
                          best=float(env["best"]), run=_freeze(_merge(env.get("run", {}), raw.get("run", {}))),
                          probe=_freeze(_merge(env.get("probe", {}), raw.get("probe", {}))),
                          async_config=raw.get("async"), batched=env.get("batched", True)))
    return Battery(definition["name"], int(definition["version"]), definition.get("description", ""),
                   int(definition.get("seed", 0)), tuple(cells), _freeze(definition))


def load_battery(name: str) -> Battery:
    """A packaged battery by name (``quick``, ``standard``, ``paper``)."""
    if not isinstance(name, str):
        raise ValueError(f"battery must be a name, one of {battery_names()}; got {name!r}")
    return build(_raw(name))


def as_battery(value: str | dict | Battery) -> Battery:
    """A ``Battery`` as given, built from battery data, or a packaged one by name."""
    return value if isinstance(value, Battery) else build(value) if isinstance(value, dict) else load_battery(value)


def recorded_hash(name: str, version: int) -> str | None:
    """The hash ``batteries/versions.py`` records for ``name`` at ``version`` (None if none)."""
    from sandbox.scoring.batteries.versions import VERSIONS

    return VERSIONS.get(name, {}).get(version)
