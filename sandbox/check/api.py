"""``sandbox.check(config)``: a verl or TRL configuration scored on its own deployment's frictions
and on a standard battery, against the built-ins."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sandbox.check.alarms import alarm_line
from sandbox.check.deployment import deployment_battery
from sandbox.check.mapping import Mapping, map_config
from sandbox.check.verdict import verdict, write_check
from sandbox.scoring.api import check_run_args, parse_methods, score_recipe
from sandbox.scoring.battery import Battery, as_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, make_recipe
from sandbox.scoring.runner import code_version, default_store


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` returns: the mapping, the tidy frames of the deployment battery and the
    chosen battery (``attrs['scorecard']`` holds each summary), the verdict lines and the files."""

    mapping: Mapping
    deployment: pd.DataFrame
    standard: pd.DataFrame
    verdict: tuple[str, ...]
    files: tuple[Path, ...] = ()


def prepare(config: Any, battery: str | dict | Battery = "quick", ignore: Sequence[str] = (),
            precision: str | None = None, seeds: int | None = None,
            label: str | None = None) -> tuple[Mapping, Battery, Battery]:
    """The mapping, the deployment battery and the chosen battery — every input checked, nothing
    run (``sandbox check`` calls it before any compute)."""
    mapping = map_config(config, ignore=ignore, precision=precision, label=label)
    chosen = as_battery(battery)
    return mapping, deployment_battery(mapping.deployment, chosen).with_seeds(seeds), chosen.with_seeds(seeds)


def check(config: Any, battery: str | dict | Battery = "quick", out: str | Path | None = None,
          ignore: Sequence[str] = (), precision: str | None = None, against: str | Sequence[str] = DEFAULT_AGAINST,
          seeds: int | None = None, backend: str = "local", workers: int | None = None,
          results: str | Path | None = None, progress: bool = True, ray_address: str | None = None,
          label: str | None = None) -> CheckReport:
    """Map ``config`` (a verl YAML, a TRL GRPOConfig as YAML/JSON/object, or a dict) onto our
    estimator, advantage and correction fields; build its deployment battery (its staleness,
    top-p/top-k with the engine's log-probs, group size, reuse, partial rollouts, and with
    ``precision='bf16'`` a precision mismatch) on the environments of ``battery`` (``quick``,
    ``standard``, or battery data); score it there and on ``battery`` against ``against`` (cached
    built-ins are reused). With ``out``, writes ``check.md|png|json``. A key we do not model is a
    one-line ``ValueError`` naming it, unless in ``ignore``."""
    start = time.perf_counter()
    check_run_args(backend, workers)
    mapping, deploy, chosen = prepare(config, battery, ignore, precision, seeds, label)
    baselines = [make_recipe(m) for m in parse_methods("against", against)]
    store = default_store(results)
    run = {"backend": backend, "workers": workers, "progress": progress, "ray_address": ray_address}
    deploy_frame = score_recipe(mapping.recipe, deploy, baselines, store, **run)
    standard_frame = score_recipe(mapping.recipe, chosen, baselines, store, **run)
    lines = verdict(mapping, deploy_frame.attrs["scorecard"], standard_frame.attrs["scorecard"])
    lines.append(alarm_line([deploy_frame, standard_frame], mapping.recipe.name))
    files = () if out is None else tuple(write_check(out, mapping, lines, deploy_frame, standard_frame,
                                                     code_version(), time.perf_counter() - start))
    return CheckReport(mapping, deploy_frame, standard_frame, tuple(lines), files)
