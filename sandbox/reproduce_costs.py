"""What ``sandbox reproduce`` will cost, said before it starts, and where a figure's records live."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.jobs import costs
from sandbox.jobs.store import ResultsStore, read_record
from sandbox.jobs.sweep import Job, unique_jobs


def record_paths(results_dir: Path, figure: str, fidelity: str, base_seed: int) -> tuple[Path, Path]:
    """Where a figure's claims and its notebook's execution record are kept."""
    name = f"{figure}.{fidelity}{f'.seed{base_seed}' if base_seed else ''}.json"
    return Path(results_dir) / "claims" / name, Path(results_dir) / "notebooks" / name


def figures_plan(all_jobs: dict[str, list[Job]], store: ResultsStore, results_dir: Path, fidelity: str,
                 base_seed: int, workers: int | None, rerun: bool, kept: set[str] = frozenset()) -> str:
    """What ``reproduce`` will cost: its jobs (``sandbox.jobs.costs``) and the notebooks it will
    execute — those whose jobs are not all finished or whose record is not intact (``--rerun``: all),
    each at the seconds its last execution took, else the measured table's. A job of a kind never
    measured counts at its figure's average job where the table has one (from a CLAIMS.md). ``kept``:
    restored committed results, finished whatever code made them (as the sweep keeps them)."""
    jobs = unique_jobs([j for js in all_jobs.values() for j in js])
    finished = costs.finished_ids(jobs, store, kept)
    per_figure = costs.measured_table().get("figures", {})  # the average job of a figure, where measured
    fallback = {j.id: per_figure[f"{name}.{fidelity}"]["job_s"] for name, figure_jobs in all_jobs.items()
                if f"{name}.{fidelity}" in per_figure for j in figure_jobs}
    plan = costs.plan(jobs, finished, workers, store, fallback)
    table, seconds, unknown = costs.measured_table().get("notebooks", {}), [], 0
    for name, figure_jobs in all_jobs.items():
        saved, state, _ = read_record(record_paths(results_dir, name, fidelity, base_seed)[1])
        if state == "ok" and not rerun and {j.id for j in figure_jobs} <= finished:
            continue
        took = saved.get("notebook_seconds") if isinstance(saved, dict) else None
        took = took if took is not None else table.get(f"{name}.{fidelity}")
        unknown += took is None
        seconds.append(took or 0.0)
    extra = f" and {len(seconds)} of {len(all_jobs)} notebooks to execute"
    extra += f" ({unknown} never timed)" if unknown else ""
    cpus = os.cpu_count() or 1  # the notebooks execute side by side, one per core (``sandbox.notebooks``)
    side_by_side = max(1, min(workers or cpus, cpus, len(seconds)))
    return plan.line(f"reproduce {fidelity}", extra_seconds=sum(seconds) / side_by_side, extra=extra)
