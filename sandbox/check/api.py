"""``sandbox.check(config)``: a verl or TRL configuration scored on its own deployment's frictions
and on a standard battery, against the built-ins."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sandbox.scoring import builtin_data
from sandbox.check.alarms import alarm_line
from sandbox.check.alternatives import alternatives
from sandbox.check.deployment import deployment_battery
from sandbox.check.mapping import Mapping, map_config
from sandbox.check.verdict import verdict, write_check
from sandbox.scoring.api import check_run_args, parse_methods, score_recipe
from sandbox.scoring.battery import Battery, as_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, Recipe, make_recipe
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
            label: str | None = None, framework: str | None = None,
            trainer: str | None = None) -> tuple[Mapping, Battery, Battery]:
    """The mapping, the deployment battery and the chosen battery — every input checked, nothing
    run (``sandbox check`` calls it before any compute)."""
    from sandbox.scoring.runner import preflight

    mapping = map_config(config, ignore=ignore, precision=precision, label=label, framework=framework, trainer=trainer)
    chosen = as_battery(battery)
    deploy, chosen = deployment_battery(mapping.deployment, chosen).with_seeds(seeds), chosen.with_seeds(seeds)
    group = f"; the config's group size (samples per prompt) is {mapping.deployment.group}"
    for b in (deploy, chosen):  # every run's memory and time, before any job and in the dry run (R8)
        preflight(b, [mapping.recipe], every=True, context=f" of battery {b.name!r}{group if b is deploy else ''}")
    return mapping, deploy, chosen


def check(config: Any, battery: str | dict | Battery = "quick", out: str | Path | None = None,
          ignore: Sequence[str] = (), precision: str | None = None, against: str | Sequence[str] = DEFAULT_AGAINST,
          seeds: int | None = None, backend: str = "local", workers: int | None = None,
          results: str | Path | None = None, progress: bool = True, ray_address: str | None = None,
          label: str | None = None, deployment_against: str = "framework", framework: str | None = None,
          trainer: str | None = None) -> CheckReport:
    """Map ``config`` (a verl YAML, a TRL GRPOConfig as YAML/JSON/object, or a dict) onto our
    estimator, advantage and correction fields; build its deployment battery (its staleness,
    top-p/top-k with the engine's log-probs, group size, reuse, partial rollouts, and with
    ``precision='bf16'`` a precision mismatch) on the environments of ``battery`` (``quick``,
    ``standard``, or battery data); score it there and on ``battery`` against ``against`` (cached
    built-ins are reused; on ``quick`` they are committed, ``sandbox.scoring.builtin_data``). On the
    deployment cells the configuration meets, by default, the losses its own framework can select
    instead (``deployment_against='framework'``: its loss modes or loss types, each the config with
    one change, ``sandbox.check.alternatives``; the verdict suggests the best as that change), or
    else the built-ins whose results the store holds there (``'cached'``: none on a first check,
    which so computes only the configuration's jobs), the best of ``against`` on ``battery``
    (``'best'``) or all (``'all'``): sandbox methods no framework setting selects. With ``out``,
    writes ``check.md|png|json``.
    ``framework`` ('verl==0.9.1', 'verl@b178a3c', 'trl==1.16.0'; default the newest) is the version
    the config is read as, ``trainer`` TRL's ('grpo', 'async_grpo'; default told by the keys).
    A key we do not model is a one-line ``ValueError`` naming it, unless in ``ignore``."""
    start = time.perf_counter()
    check_run_args(backend, workers, results=results, out=out, ray_address=ray_address)
    if deployment_against not in DEPLOYMENT_AGAINST:
        raise ValueError(f"deployment_against must be one of {DEPLOYMENT_AGAINST}, got {deployment_against!r}")
    mapping, deploy, chosen = prepare(config, battery, ignore, precision, seeds, label, framework, trainer)
    baselines = [make_recipe(m) for m in parse_methods("against", against)]
    store = default_store(results)
    run = {"backend": backend, "workers": workers, "progress": progress, "ray_address": ray_address}
    kept = builtin_data.restore(chosen, baselines, store)  # the committed built-ins: none recomputed
    standard_frame = score_recipe(mapping.recipe, chosen, baselines, store, keep=kept,
                                  fallback=builtin_data.fallback_costs(chosen, chosen, [mapping.recipe, *baselines]),
                                  **run)
    options = alternatives(config, mapping, framework, trainer, ignore) if deployment_against == "framework" else {}
    rivals = [r for _, r in options.values()] if options or deployment_against == "framework" else \
        deployment_rivals(deployment_against, deploy, baselines, standard_frame, store)
    deploy_frame = score_recipe(mapping.recipe, deploy, rivals, store,
                                fallback=builtin_data.fallback_costs(deploy, chosen, [mapping.recipe, *rivals]), **run)
    lines = verdict(mapping, deploy_frame.attrs["scorecard"], standard_frame.attrs["scorecard"],
                    {name: change for name, (change, _) in options.items()} if deployment_against == "framework"
                    else None)
    lines.append(alarm_line([deploy_frame, standard_frame], mapping.recipe.name, mapping.logs, mapping.source))
    files = () if out is None else tuple(write_check(out, mapping, lines, deploy_frame, standard_frame,
                                                     code_version(), time.perf_counter() - start))
    return CheckReport(mapping, deploy_frame, standard_frame, tuple(lines), files)


DEPLOYMENT_AGAINST = ("framework", "cached", "best", "all")


def deployment_rivals(mode: str, deploy: Battery, baselines: Sequence[Recipe], standard: pd.DataFrame,
                      store) -> list[Recipe]:
    """The built-ins to score on the deployment cells: those already stored on every cell ('cached'),
    the best on the chosen battery ('best'), or all ('all')."""
    from sandbox.scoring.runner import jobs

    if mode == "all":
        return list(baselines)
    if mode == "best":
        return [best_builtin(standard, baselines)]
    return [b for b in baselines if all(store.quick_state(j.id) == "ok" for j in jobs(deploy, b))]


def best_builtin(frame: pd.DataFrame, baselines: Sequence[Recipe]) -> Recipe:
    """The baseline with the highest IQM on a battery's scorecard."""
    aggregate = frame.attrs["scorecard"]["aggregate"]
    return max(baselines, key=lambda b: aggregate[b.name]["iqm"]["estimate"])


def dry_run(config: Any, battery: str | dict | Battery = "quick", ignore: Sequence[str] = (),
            precision: str | None = None, against: str | Sequence[str] = DEFAULT_AGAINST, seeds: int | None = None,
            workers: int | None = None, results: str | Path | None = None,
            deployment_against: str = "framework", framework: str | None = None,
            trainer: str | None = None) -> list[str]:
    """What ``check`` would do, nothing run or written: the cost of each battery, from measured job
    costs (the store's results, the committed built-ins, else the same environment's committed cells)."""
    from sandbox.jobs import costs
    from sandbox.jobs.store import DEFAULT_ROOT
    from sandbox.scoring.runner import jobs

    mapping, deploy, chosen = prepare(config, battery, ignore, precision, seeds, framework=framework, trainer=trainer)
    baselines = [make_recipe(m) for m in parse_methods("against", against)]
    folder = Path(results if results is not None else DEFAULT_ROOT) / "scores"
    store = default_store(results) if folder.is_dir() else None  # a store makes its folder: none is made
    committed = set(builtin_data.committed_ids(chosen))
    lines, total = [], 0.0
    rivals = {"all": baselines, "best": baselines[:1]}.get(deployment_against)
    if deployment_against == "framework":
        rivals = [r for _, r in alternatives(config, mapping, framework, trainer, ignore).values()]
    elif rivals is None:  # 'cached': the built-ins already stored on every deployment cell
        rivals = [] if store is None else [b for b in baselines
                                           if all(store.quick_state(j.id) == "ok" for j in jobs(deploy, b))]
    for name, b, recipes in (("battery " + chosen.name, chosen, [mapping.recipe, *baselines]),
                             ("deployment battery", deploy, [mapping.recipe, *rivals])):
        every = list({j.id: j for r in recipes for j in jobs(b, r)}.values())
        finished = {j.id for j in every if j.id in committed or (store is not None and store.quick_state(j.id) == "ok")}
        plan = costs.plan(every, finished, workers, store, builtin_data.fallback_costs(b, chosen, recipes))
        what = "framework option(s)" if b is deploy and deployment_against == "framework" else "built-in(s)"
        lines.append(plan.line(f"{name}: {len(recipes) - 1} {what} + {mapping.label!r}"))
        total += plan.seconds
    # the two batteries run one after the other: their times add
    lines.append(f"in all: about {costs.duration(total)} on {plan.workers} worker{'s' if plan.workers != 1 else ''} "
                 "(the batteries run one after the other)" if total else "in all: nothing to run")
    if deployment_against == "best":
        lines.append("the deployment cells run against the best built-in on battery "
                     f"{chosen.name!r} (known once it is scored; costed here as one built-in)")
    return lines
