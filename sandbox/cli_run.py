"""``sandbox run``: seeds, training (simulated or on Ray) as a job of the jobs package run in this
process (``sandbox.jobs.backends.InProcess``, which stores it), and the report.

The report gives the main metric's stability per seed (peak, final, drawdown —
``sandbox.analysis.stability``) and every final metric: with one seed the values, with n > 1 the
mean and its 95% t-interval over seeds (valid at small n, unlike a bootstrap).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from sandbox.analysis.stability import stability
from sandbox.jobs.backends import InProcess
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import metrics_only

#: the main metric of a run: the first of these columns it logs, and whether higher is better
MAIN_METRICS = (("error", False), ("reward", True))
#: identifiers and bookkeeping, not metrics
NOT_METRICS = {"step", "member", "seed", "run_id", "job_id", "label", "completed_steps", "wall_time"}


def run_configs(config: RunConfig, seeds: int | None) -> list[RunConfig]:
    """``seeds`` seeds of ``config``: one batched population where the task has one, else
    separate configs with seeds seed, seed + 1, … (a task or a chosen policy ``one_model_per_run``)."""
    from sandbox.tasks import TASKS, load_tasks
    from sandbox.tasks.compose import one_model_per_run

    if seeds is None:
        return [config]
    if not (isinstance(seeds, int) and seeds >= 1):
        raise ValueError(f"--seeds must be an integer ≥ 1, got {seeds!r}")
    if config.task not in TASKS:
        load_tasks(config.task)
    if one_model_per_run(TASKS.get(config.task), config.task_kwargs):  # the task's or its policy's (declared)
        return [config.replace(seed=config.seed + i) for i in range(seeds)]
    given = config.task_kwargs.get("population")
    if given is not None and given != seeds:
        raise ValueError(f"--seeds {seeds} contradicts task_kwargs.population={given}; give one of them")
    return [config.replace(task_kwargs={**config.task_kwargs, "population": seeds})]


def async_config_from_args(args: argparse.Namespace):
    """The Ray runtime's AsyncConfig, or None for the simulated loop; Ray-only options without
    ``--async-workers`` are an error (they would silently do nothing)."""
    if not args.async_workers:
        given = [f"--{name.replace('_', '-')}" for name in ("async_mode", "ray_address")
                 if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} need(s) --async-workers N (the Ray runtime); for simulated "
                             "staleness use --set staleness.kind=fixed --set staleness.D=S")
        return None
    from sandbox.runtime.ray_async import AsyncConfig

    return AsyncConfig(n_workers=args.async_workers, mode=args.async_mode or "fixed_lag", address=args.ray_address)


def run_job(config: RunConfig, async_config=None) -> Job:
    """The sweep job of this run, so that ``sandbox sweep`` and notebooks find a stored run; an
    asynchronous run is its own job (its own id): the runtime's settings that differ from the
    defaults are part of it, the cluster address is not."""
    if async_config is None:
        return Job.training(config)
    defaults = type(async_config)()
    settings = {f.name: getattr(async_config, f.name) for f in dataclasses.fields(async_config)
                if f.name != "address" and getattr(async_config, f.name) != getattr(defaults, f.name)}
    params = config.to_dict()
    params.pop("label")
    return Job("sandbox.runtime.ray_async:train_async_job", {**params, "async_config": settings},
               config.label or config.estimator)


def train_and_store(configs: list[RunConfig], async_config=None, store: ResultsStore | None = None,
                    progress: bool = True) -> tuple[pd.DataFrame, list[str], list[Path]]:
    """Train every config (on Ray when ``async_config`` is given) as its sweep job, run by the
    jobs package's in-process backend, which stores each result in ``store`` (none without one);
    returns the frames together, the run ids and the stored files. An asynchronous run's id is its
    job's: its own, never the simulated run's."""
    from sandbox.jobs.canaries import check_plugin_estimators

    check_plugin_estimators([run_job(config, async_config) for config in configs])  # as a sweep does (R10)
    started = False
    if async_config is not None:
        from sandbox.core.processes import start_ray
        from sandbox.runtime.ray_async import check_async

        for config in configs:
            check_async(config)  # before Ray starts
        started = start_ray(async_config.address, max(2, async_config.n_workers + 1), progress=progress)
    backend = InProcess(store, progress=progress)
    frames, run_ids, paths = [], [], []
    try:
        for config in configs:
            job = run_job(config, async_config)
            frame, path = backend.run(job)
            if async_config is not None:
                frame = frame.assign(run_id=job.id)
            if path is not None:
                paths.append(path)
            frames.append(frame)
            run_ids.append(str(frame["run_id"].iloc[0]))
    finally:
        if started:
            import ray

            ray.shutdown()
    return pd.concat(frames, ignore_index=True), run_ids, paths


def _summary(values: np.ndarray) -> str:
    """One value, or the mean and its 95% t-interval over seeds (``sandbox.analysis.stats``, imported
    here: it pulls in scipy.stats, half a second a one-seed run need not wait)."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return "nan"
    if values.size == 1 or np.ptp(values) == 0:
        return f"{values[0]:.4g}" + ("" if values.size == 1 else " (every seed)")
    from sandbox.analysis.stats import t_interval

    iv = t_interval(values, 0.95)
    return f"{iv.estimate:.4g} [{iv.low:.4g}, {iv.high:.4g}]"


def report(frame: pd.DataFrame, config: RunConfig, run_ids: list[str]) -> str:
    """The text ``sandbox run`` prints."""
    if frame.empty:
        raise ValueError("the run logged no rows")
    final = frame.sort_values("step").groupby(["run_id", "member"]).tail(1)
    n = len(final)
    ids = run_ids[0] if len(run_ids) == 1 else f"{run_ids[0]} … {run_ids[-1]} ({len(run_ids)} runs)"
    how = "" if n == 1 else (" (a population)" if len(run_ids) == 1 else " (one run each)")
    lines = [f"run {ids}: {config.task} / {config.estimator}, {n} seed{'s' if n > 1 else ''}{how}, "
             f"step {int(final['step'].max())}"]
    per = "" if n == 1 else f" — mean [95% t-interval] over {n} seeds"
    metric = next(((c, hib) for c, hib in MAIN_METRICS if c in frame.columns), None)
    if metric is not None:
        column, higher = metric
        table = stability(frame, column, higher_is_better=higher, by=("run_id", "member"))
        lines.append(f"{column} ({'higher' if higher else 'lower'} is better){per}:")
        lines += [f"  {name:<22} {_summary(table[name].to_numpy(float))}" for name in ("final", "peak", "drawdown")]
    lines.append(f"final metrics{per}:")
    for column in metrics_only(final).columns:  # rows carry their config as columns too
        if column in NOT_METRICS or not (pd.api.types.is_numeric_dtype(final[column]) or
                                         pd.api.types.is_bool_dtype(final[column])):
            continue
        values = final[column].astype(float).to_numpy()
        if pd.api.types.is_bool_dtype(final[column]):
            lines.append(f"  {column:<22} {int(values.sum())} of {n}")
        elif not np.isnan(values).all():
            lines.append(f"  {column:<22} {_summary(values)}")
    return "\n".join(lines)


__all__ = ["async_config_from_args", "report", "run_configs", "run_job", "train_and_store"]
