"""``sandbox.score``: score an estimator (or recipe) on a battery against the built-ins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sandbox.core.validation import check_writable_dir
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import BACKENDS
from sandbox.scoring.battery import Battery, as_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, Recipe, make_recipe, recipe_names
from sandbox.scoring.report import summarise, write
from sandbox.scoring.runner import code_version, default_store, import_plugin, run_battery


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
    (``results/scores``) when the battery version and code version match.

    ``settings``: ``{"eta": 0.5}`` — estimator hyperparameters, or the recipe keys ``advantage``,
    ``advantage_kwargs``, ``controllers``.
    """
    check_run_args(backend, workers)
    if out is not None:  # before any compute: a report that cannot be written is known now
        if not str(out).strip():
            raise ValueError("out is empty; give a folder for the report (an empty one would write into the current folder)")
        check_writable_dir(out, "out")
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
    frame = score_recipe(recipe, bat, baselines, default_store(results), plugins, backend=backend, workers=workers,
                         progress=progress, ray_address=ray_address)
    if out is not None:
        write(frame.attrs["scorecard"], frame, out, code_version())
    return frame


def check_run_args(backend: str, workers: int | None) -> None:
    """A backend in ``BACKENDS`` and ``workers`` None or an integer ≥ 1, else a one-line error."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if workers is not None and not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers must be an integer ≥ 1, got {workers!r}")


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
