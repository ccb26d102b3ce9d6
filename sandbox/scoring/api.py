"""``sandbox.score``: score an estimator (or recipe) on a battery against the built-ins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sandbox.core.validation import check_writable_dir
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import BACKENDS, check_workers
from sandbox.scoring import builtin_data
from sandbox.scoring.battery import Battery, as_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, Recipe, make_recipe, recipe_names
from sandbox.scoring.report import summarise, write
from sandbox.scoring.runner import (
    code_version,
    default_store,
    import_plugin,
    preflight,
    run_battery,
)


def parse_methods(name: str, value) -> list[str]:
    if not isinstance(value, str) and not (isinstance(value, Sequence) and all(isinstance(i, str) for i in value)):
        raise ValueError(f"{name} must be a comma-separated string or a list of names, got {value!r}")
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [i.strip() for i in items if i.strip()]
    valid = recipe_names()
    if not items:
        raise ValueError(f"{name} names no method; give recipes or estimators, comma-separated (to score one "
                         f"alone, name it: --{name} NAME); valid: {', '.join(valid)}")
    unknown = [i for i in items if i not in valid]
    if unknown:
        raise ValueError(f"{name} must name recipes or estimators; unknown: {unknown}; valid: {', '.join(valid)}")
    return list(dict.fromkeys(items))


def score(name: str, plugin: str | Sequence[str] | None = None, settings: dict | None = None,
          battery: str | dict | Battery = "quick", against: str | Sequence[str] = DEFAULT_AGAINST,
          seeds: int | None = None, backend: str = "local", out: str | Path | None = None, results: str | Path | None = None,
          workers: int | None = None, progress: bool = True, ray_address: str | None = None,
          label: str | None = None) -> pd.DataFrame:
    """Score ``name`` (a registered estimator, one from ``plugin``, or a built-in recipe) on
    ``battery`` (a packaged battery's name, or battery data as in ``sandbox/scoring/batteries/``)
    against ``against`` (built-in recipes or registered estimators: ``recipe_names()``); returns
    the tidy frame (one row per method × cell × seed: raw ``value``, ``score`` in [0, 1],
    ``diverged``). ``frame.attrs`` holds the scorecard
    summary and the job counts (total, reused, computed). With ``out``, writes
    ``scorecard.png|md|json`` there. Built-ins are reused from the results store
    (``results/scores``) when the battery version and code version match; on a battery whose
    built-ins ship with the package (``quick``: ``sandbox.scoring.builtin_data``) they are restored
    into the store first, so a first score on a fresh clone computes only ``name``'s jobs.

    ``settings``: ``{"eta": 0.5}`` — estimator hyperparameters, or the recipe keys ``advantage``,
    ``advantage_kwargs``, ``controllers``.
    """
    check_run_args(backend, workers, results=results, out=out, ray_address=ray_address)
    plugins = tuple([plugin] if isinstance(plugin, str) else plugin or ())
    for p in plugins:
        if Path(p).suffix == ".py" and not Path(p).is_file():
            raise ValueError(f"plugin file {p!r} does not exist")
        import_plugin(p)
    bat = as_battery(battery).with_seeds(seeds)
    recipe = make_recipe(name, settings)
    if label is not None or settings:
        recipe = type(recipe)(**{**recipe.__dict__, "name": label or _label(name, settings)})
    baselines = [make_recipe(m) for m in parse_methods("against", against) if not (m == recipe.name and not settings)]
    if seeds is not None:  # the battery's own seed counts fit; a chosen one is checked before any job
        preflight(bat, [recipe, *baselines])
    store = default_store(results)
    kept = builtin_data.restore(bat, [recipe, *baselines], store)  # the committed built-ins: none recomputed
    frame = score_recipe(recipe, bat, baselines, store, plugins, backend=backend, workers=workers,
                         progress=progress, ray_address=ray_address, keep=kept,
                         fallback=builtin_data.fallback_costs(bat, bat, [recipe, *baselines]))
    if out is not None:
        write(frame.attrs["scorecard"], frame, out, code_version())
    return frame


def check_run_args(backend: str, workers: int | None, *, results: str | Path | None = None,
                   out: str | Path | None = None, ray_address: str | None = None) -> None:
    """The options ``score`` and ``check`` share, checked before any compute, else a one-line error:
    a backend in ``BACKENDS``; ``workers`` None or an integer in 1..``max_workers`` (not a bool);
    ``ray_address`` only with ``backend='ray'``; ``results`` and ``out`` folders that can be written
    (an empty path would write into the current folder)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    check_workers(workers, backend)
    if ray_address is not None and backend != "ray":
        raise ValueError(f"ray_address {ray_address!r} needs backend='ray' (it would be ignored)")
    for name, path in (("results", results), ("out", out)):
        if path is None:
            continue
        if not str(path).strip():
            raise ValueError(f"{name} is empty; give a folder (an empty one would write into the current folder)")
        check_writable_dir(path, name)


def score_recipe(recipe: Recipe, battery: Battery, baselines: Sequence[Recipe], store: ResultsStore,
                 plugins: tuple[str, ...] = (), backend: str = "local", workers: int | None = None,
                 progress: bool = True, ray_address: str | None = None, fallback: dict[str, float] | None = None,
                 keep: Sequence[str] = ()) -> pd.DataFrame:
    """Run (or reuse) ``recipe`` and ``baselines`` on every cell of ``battery``; the tidy frame with
    the scorecard summary (``attrs["scorecard"]``, ``recipe`` first) and the job counts
    (``attrs["jobs"]``). The one path of ``score`` and ``sandbox check``."""
    frame, report = run_battery(battery, [(recipe, plugins)] + [(b, ()) for b in baselines], store,
                                backend=backend, workers=workers, progress=progress, ray_address=ray_address,
                                fallback=fallback, keep=keep)
    methods = [recipe.name] + [b.name for b in baselines]
    frame.attrs["scorecard"] = summarise(frame, battery, recipe.name, methods)
    frame.attrs["jobs"] = {"total": report.total, "reused": report.skipped, "computed": report.computed}
    return frame


def _label(name: str, settings: dict) -> str:
    return f"{name}[{','.join(f'{k}={v}' for k, v in settings.items())}]"
