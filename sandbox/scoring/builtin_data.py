"""The built-ins' results on the shipped batteries, committed (``builtins-quick.parquet`` beside this
file) so that a first ``sandbox score NEW`` or ``sandbox check`` on a fresh clone computes only the
new estimator's or the configuration's jobs.

They are deterministic for a code version: ``export`` writes the stored results of the default
built-ins (``DEFAULT_AGAINST``) on a battery into one compact file with the paper tier's format
(``sandbox.analysis.figure_data``: the frames, each job's metadata and code stamp); ``restore``
writes the ones a score or a check needs back into its results store, exactly as they were stored, where the
store lacks them. Their job ids carry the scoring stamp (package version + ``NUMERICS``), so a
change of numbers makes new ids and the committed file simply stops matching: a score or check
computes them then, and ``python benchmarks/check.py --export`` rewrites the file.

Their stored CPU seconds are also what a check's cost line is made from (``fallback_costs``): a
deployment cell never run before costs what the same environment's committed cells cost.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sandbox.analysis import figure_data
from sandbox.jobs import costs
from sandbox.jobs.store import ResultsStore
from sandbox.scoring.battery import Battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, Recipe, make_recipe
from sandbox.scoring.runner import jobs

HERE = Path(__file__).parent


def data_path(battery: Battery) -> Path:
    return HERE / f"builtins-{battery.name}.parquet"


def restore(battery: Battery, baselines: Sequence[Recipe], store: ResultsStore) -> list[str]:
    """Restore into ``store`` the committed results of ``baselines`` on ``battery`` it lacks; the
    ids of every committed job of theirs (restored now or before), to be kept as they are."""
    path = data_path(battery)
    if not path.is_file():
        return []
    ids = [j.id for b in baselines for j in jobs(battery, b)]
    figure_data.restore(path, store, ids)
    return sorted(figure_data.jobs_in(path) & set(ids))


def committed_ids(battery: Battery) -> list[str]:
    """The ids of the jobs committed for ``battery`` (none when it has no data file)."""
    path = data_path(battery)
    return sorted(figure_data.jobs_in(path)) if path.is_file() else []


def first_run(store: ResultsStore, battery: Battery) -> dict:
    """What a first ``sandbox score`` or ``sandbox check`` did in the fresh results folder ``store``:
    its jobs, how many were the shipped built-ins restored, and the jobs it computed with their stored
    CPU seconds (what ``benchmarks/first_score.py`` and ``benchmarks/check.py`` time)."""
    held = store.job_ids()
    committed = set(committed_ids(battery))
    computed = [j for j in held if j not in committed]
    cpu = sum(float(store.read(j)["cpu_s"].iloc[0]) for j in computed)
    return {"jobs": len(held), "restored": len(committed & set(held)), "computed": len(computed),
            "computed cpu_s": cpu}


def export(battery: Battery, store: ResultsStore, path: str | Path | None = None) -> Path:
    """Write the stored results of the default built-ins on ``battery`` (all must be stored)."""
    every = [j for name in DEFAULT_AGAINST for j in jobs(battery, make_recipe(name))]
    return figure_data.export(every, store, path or data_path(battery))


def committed_costs(battery: Battery) -> dict[str, list[float]]:
    """Per environment, the CPU seconds of the committed built-in jobs on ``battery``."""
    path = data_path(battery)
    return _costs(str(path), path.stat().st_mtime) if path.is_file() else {}


@functools.lru_cache(maxsize=4)
def _costs(path: str, mtime: float) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:  # read through the store: the same metadata a check sees
        store = ResultsStore(tmp)
        figure_data.restore(path, store)
        by_env: dict[str, list[float]] = {}
        for job_id in store.job_ids():
            meta = store.metadata(job_id)
            seconds = costs.job_cost(meta)
            env = meta.get("params", {}).get("cell", {}).get("env")
            if env is not None and isinstance(seconds, (int, float)):
                by_env.setdefault(env, []).append(float(seconds))
    return by_env


def fallback_costs(battery: Battery, chosen: Battery, recipes: Sequence[Recipe]) -> dict[str, float]:
    """Job id → seconds for ``recipes`` on ``battery``: the median committed cost of ``chosen``'s
    cells of the same environment (the deployment cells keep its budgets and samples per step)."""
    by_env = committed_costs(chosen)
    medians = {env: statistics.median(v) for env, v in by_env.items()}
    everything = [c for v in by_env.values() for c in v]
    default = statistics.median(everything) if everything else None
    out = {}
    for recipe in recipes:
        for job in jobs(battery, recipe):
            seconds = medians.get(job.params["cell"]["env"], default)
            if seconds is not None:
                out[job.id] = seconds
    return out
