"""Independent replications: base seed K moves every seed of a figure's jobs by K·SEED_STRIDE
(``sandbox reproduce --base-seed K``, ``$SANDBOX_BASE_SEED`` in a notebook's ``results()``)."""

from __future__ import annotations

import copy
import inspect
import os
from dataclasses import replace

from sandbox.jobs.sweep import Job

#: base seed K moves every seed by K·SEED_STRIDE: the seed sets of different base seeds are disjoint
SEED_STRIDE = 1000


def base_seed_from_env() -> int:
    """``$SANDBOX_BASE_SEED`` (default 0), the base seed a notebook's ``results()`` applies."""
    value = os.environ.get("SANDBOX_BASE_SEED", "0")
    if not value.isdigit():
        raise ValueError(f"SANDBOX_BASE_SEED must be an integer ≥ 0, got {value!r}")
    return int(value)


def _shift(params, offset: int):
    if isinstance(params, dict):
        return {k: v + offset if k == "seed" and isinstance(v, int) else _shift(v, offset) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return type(params)(_shift(v, offset) for v in params)
    return params


def _has_seed(params) -> bool:
    if isinstance(params, dict):
        return "seed" in params or any(_has_seed(v) for v in params.values())
    return isinstance(params, (list, tuple)) and any(_has_seed(v) for v in params)


def offset_seeds(jobs: list[Job], base_seed: int) -> list[Job]:
    """The jobs with every seed moved by ``base_seed``·SEED_STRIDE: each ``seed`` entry of their
    parameters (nested run configs too) or, for a job function with a ``seed`` argument it is not
    given, that argument (its default + the offset). Base seed 0 returns the jobs unchanged."""
    if not isinstance(base_seed, int) or base_seed < 0:
        raise ValueError(f"base_seed must be an integer ≥ 0, got {base_seed!r}")
    if base_seed == 0:
        return list(jobs)
    offset = base_seed * SEED_STRIDE
    out = []
    for job in jobs:
        params = copy.deepcopy(job.params)
        if _has_seed(params):
            params = _shift(params, offset)
        else:
            arg = inspect.signature(job.resolve()).parameters.get("seed")
            if arg is not None and isinstance(arg.default, int):
                params["seed"] = arg.default + offset
        out.append(replace(job, params=params))
    return out
