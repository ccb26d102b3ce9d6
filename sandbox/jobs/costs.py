"""What a sweep will cost, said before it starts: how many jobs, how many are finished already, and
roughly how long the rest take.

A job's cost is estimated from jobs of the same *kind* — its function and its parameters without
those that name the method or the seed (``KIND_FREE``), which change little what a job costs:
first the CPU seconds stored with the sweep's finished results of that kind (``cpu_seconds`` in
their metadata; the wall ``seconds`` for a job that ran on Ray, whose workers' CPU time is not
counted, and for results older than that), else the table of measured costs
kept as data in ``job_costs.json`` (``python benchmarks/job_costs.py`` writes it from a results
folder), else the other results in the store (those of other code, say).
Jobs of a kind never measured count at the average of the others, and the line says how many.
The time is the CPU seconds over the workers (each job runs on one thread), at least the longest job.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tqdm.auto import tqdm

#: parameters that name the method or the seed (or stamp the code): left out of a job's kind
KIND_FREE = frozenset({"seed", "label", "estimator", "estimator_kwargs", "advantage", "advantage_kwargs",
                       "controllers", "recipe", "code", "plugins", "plugin_sha"})
TABLE = Path(__file__).with_name("job_costs.json")


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if k not in KIND_FREE}
    if isinstance(value, (list, tuple)):
        return [_strip(v) for v in value]
    return value


def kind(fn: str, params: dict) -> str:
    """The kind of the job ``fn(**params)``: a hash of the function and its parameters without
    ``KIND_FREE`` (at any depth)."""
    payload = json.dumps({"fn": fn, "params": _strip(params)}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def measured_table() -> dict:
    """``job_costs.json``: {'kinds': {kind: {'cpu_s', 'jobs', 'example'}}, 'notebooks':
    {'NAME.FIDELITY': seconds}, 'notes': [where and how they were measured]}."""
    return json.loads(TABLE.read_text()) if TABLE.is_file() else {"kinds": {}, "notebooks": {}}


def job_cost(meta: dict) -> float | None:
    """A stored result's cost in seconds: its CPU seconds, or its wall seconds where those say more —
    a job that ran on Ray (its workers' CPU time is not this process's) or one stored before CPU time was."""
    cpu, wall = meta.get("cpu_seconds"), meta.get("seconds")
    return wall if meta.get("ray") or cpu is None else cpu


def stored_costs(store, job_ids: Iterable[str]) -> dict[str, list[float]]:
    """The costs (``job_cost``) of the given stored results, by kind."""
    by_kind: dict[str, list[float]] = {}
    for job_id in job_ids:
        try:
            meta = store.metadata(job_id)
        except (OSError, ValueError):
            continue
        seconds = job_cost(meta)
        if "fn" in meta and isinstance(seconds, (int, float)):
            by_kind.setdefault(kind(meta["fn"], meta.get("params", {})), []).append(float(seconds))
    return by_kind


def finished_ids(jobs: Sequence, store, kept: set[str] = frozenset()) -> set[str]:
    """The ids of ``jobs`` whose results ``store`` holds and a sweep would keep: made by this code (or
    by other code under ``$SANDBOX_ACCEPT_STALE_CODE=1``, or named in ``kept`` — restored committed
    results — as ``run_sweep`` keeps them), judged from each file's schema (``quick_state``: the
    sweep verifies the data)."""
    stale_too = os.environ.get("SANDBOX_ACCEPT_STALE_CODE", "") == "1"
    return {j.id for j in jobs
            if (state := store.quick_state(j.id)) == "ok" or (state == "stale" and (stale_too or j.id in kept))}


@dataclass
class Plan:
    """A sweep before it runs: ``total`` jobs, ``finished`` of them, the rest to run estimated at
    ``cpu_seconds`` (``unmeasured`` of them at the average), ``longest`` the costliest job."""

    total: int
    finished: int
    cpu_seconds: float
    longest: float
    unmeasured: int
    workers: int

    @property
    def to_run(self) -> int:
        return self.total - self.finished

    @property
    def seconds(self) -> float:
        """Wall seconds on ``workers`` single-threaded workers (no waiting for a core)."""
        return max(self.cpu_seconds / max(self.workers, 1), self.longest) if self.to_run else 0.0

    def line(self, what: str, extra_seconds: float = 0.0, extra: str = "") -> str:
        """'WHAT: 120 jobs, 0 finished, 120 to run: about 25 min on 2 workers (…)'."""
        head = f"{what}: {self.total} job{'s' if self.total != 1 else ''}, {self.finished} finished, {self.to_run} to run"
        if not self.to_run and not extra_seconds:
            return head
        how = "from measured costs of jobs like these"
        if self.unmeasured:
            how += f"; {self.unmeasured} never measured, counted at the average"
        if self.to_run and self.unmeasured > self.to_run / 4:  # an average of a few says nothing
            return f"{head}{extra}; the time is unknown: {self.unmeasured} of the jobs to run were never measured"
        return (f"{head}{extra}: about {duration(self.seconds + extra_seconds)} on {self.workers} "
                f"worker{'s' if self.workers != 1 else ''} ({how}{busy()})")


def busy() -> str:
    """'; the machine is busy, load 10.3 on 2 cores: expect longer' when other work holds the cores
    (the estimate is CPU time: a worker gets only its share of a busy core)."""
    try:
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
    except (OSError, AttributeError):
        return ""
    return f"; the machine is busy, load {load:.1f} on {cores} cores: expect longer" if load > cores else ""


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 600:
        return f"{seconds / 60:.1f} min"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plan(jobs: Sequence, finished: set[str], workers: int | None, store=None,
         fallback: dict[str, float] | None = None) -> Plan:
    """The ``Plan`` of ``jobs`` (unique) of which ``finished`` (ids) are done. A job's cost is the
    median over the same kind of: these jobs' finished results in ``store``, else the table, else
    the other results in ``store`` (read only when needed: a big store takes seconds to read),
    else ``fallback[job id]`` (e.g. the average job of its figure at that fidelity)."""
    todo = [j for j in jobs if j.id not in finished]
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    if not todo:
        return Plan(len(jobs), len(jobs) - len(todo), 0.0, 0.0, 0, workers)
    kinds = [kind(job.fn, job.params) for job in todo]
    sources = [stored_costs(store, finished) if store is not None else {},
               {k: [v["cpu_s"]] for k, v in measured_table()["kinds"].items()}]
    if store is not None and not set(kinds) <= set(sources[0]) | set(sources[1]):
        sources.append(stored_costs(store, set(store.job_ids()) - finished))
    fallback = fallback or {}
    costs = [next((statistics.median(s[k]) for s in sources if k in s), fallback.get(job.id))
             for job, k in zip(todo, kinds)]
    known = [c for c in costs if c is not None]
    average = statistics.fmean(known) if known else 0.0
    unmeasured = sum(c is None for c in costs)
    return Plan(len(jobs), len(jobs) - len(todo), sum(known) + unmeasured * average,
                max(known, default=0.0), unmeasured, workers)


def announce(text: str) -> None:
    """Say ``text`` on stderr, above any progress bar."""
    tqdm.write(text, file=sys.stderr)


__all__ = ["KIND_FREE", "Plan", "announce", "duration", "finished_ids", "job_cost", "kind", "measured_table", "plan", "stored_costs"]
