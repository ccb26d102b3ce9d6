"""Running a battery: one job per (method, cell) through the sweep engine and the results store.

A job's parameters hold the cell, the recipe, the battery's name and version and the *code
version* (the package version and its numerics version, ``sandbox.core.numerics``: bumped on every
change of a number), so a stored result is reused exactly when all of them match: the built-ins are
computed once per battery and code version, and scoring a new estimator costs only its own runs. A plugin's source hash joins its jobs' parameters.
Interrupted runs resume (finished jobs are never recomputed; writes are atomic).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

from sandbox.analysis.alarms import run_alarms, run_logged
from sandbox.core.numerics import NUMERICS
from sandbox.jobs import costs
from sandbox.jobs.devices import device_from_env, on_device
from sandbox.jobs.pool import import_plugins
from sandbox.jobs.store import DEFAULT_ROOT, ResultsStore
from sandbox.jobs.store import code_version as store_code_version
from sandbox.jobs.sweep import Job, SweepReport, intra_op_threads, run_sweep
from sandbox.runtime.config import RunConfig
from sandbox.scoring.battery import Battery, Cell
from sandbox.scoring.recipes import Recipe

log = logging.getLogger(__name__)


def code_version() -> str:
    """The library's code version, stamped into every scoring job: the package version and the
    numerics version (``sandbox.core.numerics``), so a change of any number makes new jobs and a
    refactor that changes none keeps the cached built-ins."""
    return f"{store_code_version()['version']}+numerics{NUMERICS}"


def file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def import_plugin(plugin: str) -> None:
    """Import a plugin (a ``.py`` path or a module name) once, through the one loader
    (``sandbox.jobs.pool.import_plugins``, as workers do); any failure is a one-line
    ``ValueError`` naming the plugin and the error."""
    path = Path(plugin)
    try:
        import_plugins([plugin])
    except Exception as err:  # a broken plugin is bad input, never a traceback
        sys.modules.pop(path.stem if path.suffix == ".py" else plugin, None)
        detail = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"plugin {plugin!r} failed to import: {type(err).__name__}: {detail}") from None


def jobs(battery: Battery, recipe: Recipe, plugins: tuple[str, ...] = ()) -> list[Job]:
    """One job per cell of ``battery`` for ``recipe``."""
    stamp = {"battery": battery.name, "version": battery.version, "code": code_version(), "seed": battery.seed}
    if plugins:
        stamp["plugins"] = [str(Path(p).resolve()) if Path(p).suffix == ".py" else p for p in plugins]
        stamp["plugin_sha"] = [file_hash(p) for p in plugins if Path(p).suffix == ".py"]
    return [Job("sandbox.scoring.runner:score_cell", {"cell": cell.to_dict(), "recipe": recipe.to_dict(), **stamp},
                f"{recipe.name} | {cell.name}") for cell in battery.cells]


def score_cell(cell: dict, recipe: dict, seed: int, plugins: list | None = None, **stamp) -> pd.DataFrame:
    """Job function: one row per seed with the raw metric (``value``), the normalised ``score``
    and ``diverged`` (a diverged seed scores 0); under an admission policy also ``dropped``, the
    fraction of the run's prompts that never reached the learner (logged ``prompts_dropped_frac``)."""
    from sandbox.estimators import ESTIMATORS
    from sandbox.scoring.probes import run_probe

    if recipe["estimator"] not in ESTIMATORS:  # a worker process: register the plugin's estimators
        for plugin in plugins or ():
            import_plugin(plugin)
    spec = Cell(**cell)
    start = time.process_time()
    with intra_op_threads(1):
        runner = run_probe if spec.kind == "probe" else _train
        frame = runner(cell, recipe, seed, spec.seeds)
    frame["cpu_s"] = time.process_time() - start  # this job's CPU time (Ray workers excluded)
    frame["score"] = [0.0 if d else spec.normalise(v) for v, d in zip(frame["value"], frame["diverged"])]
    frame["method"], frame["cell"], frame["env"], frame["friction"] = recipe["name"], spec.name, spec.env, spec.friction
    return frame


def cell_configs(cell: dict, recipe: dict, seed: int, seeds: int) -> list[RunConfig]:
    """The run configs of the recipe on the cell: the seeds as one population, or one run per seed
    (each validated as it is built: a size beyond the machine is one line, before any training)."""
    rec = Recipe(**{**recipe, "controllers": tuple(tuple(c) for c in recipe["controllers"])})
    fields = _per_context_fallback({**cell["run"], **rec.run_fields()})
    batched = cell.get("batched", True)
    return [RunConfig.from_dict({**fields, "seed": seed if batched else seed + s,
                                 "task_kwargs": {**fields.get("task_kwargs", {}), "population": seeds if batched else 1}})
            for s in range(1 if batched else seeds)]


def preflight(battery: Battery, recipes: Sequence[Recipe], every: bool = False, context: str = "") -> None:
    """Build the batched run config of every environment's first training cell (``every``: of
    every training cell, the first of an unbatched cell's runs) for each recipe before any job runs,
    so that a seed count the machine cannot hold (``--seeds 100000``), or a size or a run time
    beyond it (a config's group size 10⁸ in ``sandbox check``), is one line naming it and the
    estimate, not job tracebacks minutes later (issue 46, R8); ``context`` follows the cell's name."""
    firsts = {}
    for cell in battery.cells:
        if cell.kind != "probe" and (every or (cell.batched and not cell.async_config)):
            firsts.setdefault(cell.name if every else cell.env, cell)
    for cell in firsts.values():
        for recipe in recipes:
            try:
                cell_configs(cell.to_dict(), recipe.to_dict(), battery.seed, cell.seeds if cell.batched else 1)
            except ValueError as err:
                seeds = "" if every else f"seeds {cell.seeds} on "
                raise ValueError(f"{seeds}cell {cell.name!r} ({recipe.name}){context}: {err}") from None


def _train(cell: dict, recipe: dict, seed: int, seeds: int) -> pd.DataFrame:
    """Train the recipe on the cell: the seeds as one population, or one run per seed."""
    from sandbox.runtime.loop import train

    configs = cell_configs(cell, recipe, seed, seeds)
    frames = []
    for i, config in enumerate(configs):
        if cell.get("async_config"):
            from sandbox.runtime.ray_async import AsyncConfig, ensure_ray, train_async

            acfg = AsyncConfig(**cell["async_config"])
            ensure_ray(acfg.address)
            frame = train_async(config, acfg)
        else:
            frame = train(config)
        last = frame.sort_values("step").groupby("member").tail(1).sort_values("member")
        metric = cell["metric"]
        rows = pd.DataFrame({
            "seed": last["member"].to_numpy() + i, "value": last[metric].to_numpy(dtype=float),
            "diverged": last["diverged"].to_numpy(dtype=bool) | ~last[metric].map(math.isfinite).to_numpy(dtype=bool),
            "steps": last["completed_steps"].to_numpy()})
        if "prompts_dropped_frac" in last:  # admission: the run's fraction of prompts never admitted
            rows["dropped"] = last["prompts_dropped_frac"].to_numpy(dtype=float)
        frames.append(pd.concat([rows, run_alarms(frame, cell, config.steps), run_logged(frame)], axis=1))
    return pd.concat(frames, ignore_index=True)


def _per_context_fallback(fields: dict) -> dict:
    """A recipe whose baseline comes from the other samples of a group (VCPO's min-variance) on a
    cell that draws one sample per context (MNIST) would learn nothing — the learner refuses it —
    so there it takes the task's default baseline instead (MNIST: Σπ², as the MNIST figures' VCPO)."""
    from sandbox.advantages import make_advantage
    from sandbox.tasks import TASKS, load_tasks

    if fields.get("advantage") is None:
        return fields
    if not make_advantage(fields["advantage"], **fields.get("advantage_kwargs", {})).baseline_from_group:
        return fields
    load_tasks()
    task = TASKS.get(fields["task"])
    knobs = {f.name: f.default for f in dataclasses.fields(task)} | fields.get("task_kwargs", {})
    if knobs.get("samples_per_context") != 1:
        return fields
    return {**fields, "advantage": task.default_advantage, "advantage_kwargs": {}}


def default_store(results: str | Path | None = None) -> ResultsStore:
    """Scores live in ``RESULTS/scores`` (``$SANDBOX_RESULTS`` or ``results``)."""
    return ResultsStore(Path(results if results is not None else DEFAULT_ROOT) / "scores")


def run_battery(battery: Battery, recipes: list[tuple[Recipe, tuple[str, ...]]], store: ResultsStore,
                backend: str = "local", workers: int | None = None, progress: bool = True,
                ray_address: str | None = None, fallback: dict[str, float] | None = None,
                keep: Collection[str] = ()) -> tuple[pd.DataFrame, SweepReport]:
    """Run (or reuse) every (recipe, cell) job and return the tidy frame (one row per method ×
    cell × seed) with the sweep report. Failed jobs raise one ``ValueError`` after all the others
    finished and were stored. Before it starts, a line says what it will cost; beyond
    ``FIRST_LOOK_SECONDS`` a second line offers a smaller comparison that fits (``first_look``).
    ``fallback`` (job id → seconds) costs jobs of a kind never measured (``costs.plan``); ``keep``
    names restored committed results kept whatever code made them (``run_sweep``'s accept_stale_code)."""
    all_jobs = on_device([j for recipe, plugins in recipes for j in jobs(battery, recipe, plugins)], device_from_env())

    def announce(plan: costs.Plan, finished: set[str]) -> str:
        if fallback:
            plan = costs.plan(all_jobs, finished, workers, store, fallback)
        return first_look(plan, finished, battery, recipes, store, workers)

    report = run_sweep(all_jobs, store, backend=backend, workers=workers, progress=progress,
                       ray_address=ray_address, desc=f"score {battery.name}", announce=announce,
                       accept_stale_code=set(keep) or None)
    if report.failed:
        labels = {j.id: j.label for j in all_jobs}
        job_id, error = next(iter(report.failed.items()))
        last = [line for line in error.strip().splitlines() if line.strip()][-1]
        raise ValueError(f"{len(report.failed)} of {report.total} job(s) failed; e.g. {labels[job_id]}: {last}")
    frame = store.read_many([j.id for j in all_jobs])
    return frame, report


#: a new user's first score of one estimator should take at most this long (issue 26)
FIRST_LOOK_SECONDS = 300


def first_look(plan: costs.Plan, finished: set[str], battery: Battery,
               recipes: list[tuple[Recipe, tuple[str, ...]]], store: ResultsStore, workers: int | None) -> str:
    """The plan's line; when it takes longer than ``FIRST_LOOK_SECONDS`` (the built-ins are not
    cached yet), a second line with the largest ``--against`` subset, in the given order, that fits."""
    line = plan.line(f"score {battery.name}")
    if plan.seconds <= FIRST_LOOK_SECONDS or plan.unmeasured == plan.to_run:
        return line
    scored, baselines = recipes[0], recipes[1:]

    def planned(chosen) -> costs.Plan:
        chosen_jobs = list({j.id: j for r, p in [scored, *chosen] for j in jobs(battery, r, p)}.values())
        return costs.plan(chosen_jobs, finished, workers, store)

    subset: list = []
    for baseline in baselines:
        if planned([*subset, baseline]).seconds > FIRST_LOOK_SECONDS:
            break
        subset.append(baseline)
    subset = subset or baselines[:1]  # the smallest comparison there is
    smaller = planned(subset)
    against = ",".join(r.name for r, _ in subset)
    return (f"{line}\nscore {battery.name}: that is more than the {FIRST_LOOK_SECONDS // 60} minutes of a first "
            f"look; for one, compare with fewer methods: --against {against} ({smaller.to_run} jobs to run, about "
            f"{costs.duration(smaller.seconds)}). Finished jobs are kept: the full comparison later runs only the rest")
