"""Sweeps: lists of jobs executed by a backend, resumable at any moment.

A ``Job`` is a function reference ``"module:function"`` plus JSON parameters; the function returns
a tidy DataFrame. Its hash (of function and parameters) names its results file. ``run_sweep``
skips finished jobs, runs the rest on local processes (default) or Ray, writes each result
atomically as soon as it finishes, and never lets one failing job stop the others. Kill it at any
moment and rerun: it completes without recomputing or corrupting anything.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import multiprocessing as mp
import os
import traceback
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from sandbox.analysis.store import ResultsStore
from sandbox.core.validation import check_choice
from sandbox.runtime.config import RunConfig, _freeze

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """``fn(**params) -> DataFrame``; ``label`` names it in plots and progress bars (not hashed)."""

    fn: str
    params: dict = field(default_factory=dict)
    label: str = ""

    @property
    def id(self) -> str:
        payload = json.dumps({"fn": self.fn, "params": _freeze(self.params)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @classmethod
    def training(cls, config: RunConfig) -> Job:
        """A training run of the actor-learner loop; its id is the run config's hash."""
        params = config.to_dict()
        params.pop("label")
        return cls("sandbox.runtime.sweep:train_job", params, config.label or config.estimator)

    def resolve(self):
        module, _, name = self.fn.partition(":")
        if not name:
            raise ValueError(f"job fn must look like 'package.module:function', got {self.fn!r}")
        return getattr(importlib.import_module(module), name)

    def run(self) -> pd.DataFrame:
        frame = self.resolve()(**self.params)
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"job {self.fn} must return a pandas DataFrame, got {type(frame).__name__}")
        frame = frame.copy()
        frame["job_id"] = self.id
        if self.label or "label" not in frame.columns:
            frame["label"] = self.label
        return frame


def train_job(**params: Any) -> pd.DataFrame:
    """Job function of a training run (parameters: the RunConfig fields)."""
    from sandbox.runtime.loop import train

    return train(RunConfig.from_dict(params))


@dataclass
class SweepReport:
    total: int
    skipped: int  # already finished before this call
    computed: int
    failed: dict[str, str]  # job id → error

    @property
    def ok(self) -> bool:
        return not self.failed


def _execute(job: Job, root: str, threads: int) -> tuple[str, str | None]:
    """Run one job in a worker and write its result (atomically) from there."""
    import torch

    torch.set_num_threads(threads)
    try:
        frame = job.run()
        ResultsStore(root).write(job.id, frame, {"fn": job.fn, "params": job.params, "label": job.label})
        return job.id, None
    except Exception:  # one failing job must not stop the sweep
        return job.id, traceback.format_exc()


def unique_jobs(jobs: Sequence[Job]) -> list[Job]:
    seen: dict[str, Job] = {}
    for job in jobs:
        seen.setdefault(job.id, job)
    return list(seen.values())


def run_sweep(jobs: Sequence[Job], store: ResultsStore, backend: str = "local", workers: int | None = None,
              progress: bool = True, ray_address: str | None = None, desc: str = "sweep") -> SweepReport:
    """Run every job whose result is not in ``store`` yet."""
    check_choice("backend", backend, BACKENDS)
    jobs = unique_jobs(jobs)
    todo = [j for j in jobs if not store.exists(j.id)]
    report = SweepReport(total=len(jobs), skipped=len(jobs) - len(todo), computed=0, failed={})
    if not todo:
        return report
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    bar = tqdm(total=len(todo), desc=desc, disable=not progress, unit="job")

    def done(job_id: str, error: str | None) -> None:
        if error is None:
            report.computed += 1
        else:
            report.failed[job_id] = error
            log.error("job %s failed:\n%s", job_id, error)
        bar.update(1)

    try:
        if backend == "ray":
            _run_ray(todo, store, workers, ray_address, done)
        elif workers == 1:
            for job in todo:
                done(*_execute(job, str(store.root), torch_threads()))
        else:
            threads = max(1, (os.cpu_count() or 1) // workers)
            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
                pending = {pool.submit(_execute, job, str(store.root), threads) for job in todo}
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        done(*fut.result())
    finally:
        bar.close()
    return report


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


@contextmanager
def intra_op_threads(n: int):
    """Run a block with ``n`` torch intra-op threads, then restore the previous count. Jobs of
    many small kernels run best on one thread, side by side in separate worker processes."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _run_ray(todo: Sequence[Job], store: ResultsStore, workers: int, address: str | None, done) -> None:
    """Ray backend: each job is a task; results come back to the driver, which writes them (the
    cluster's nodes need not share a file system)."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ValueError("backend='ray' needs ray: pip install -e '.[distributed]'") from err

    started = False
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False)
        started = True

    @ray.remote(num_cpus=1)
    def run_remote(job: Job) -> tuple[str, pd.DataFrame | None, str | None]:
        import torch

        torch.set_num_threads(1)
        try:
            return job.id, job.run(), None
        except Exception:
            return job.id, None, traceback.format_exc()

    try:
        by_id = {j.id: j for j in todo}
        refs = [run_remote.remote(job) for job in todo]
        while refs:
            ready, refs = ray.wait(refs, num_returns=1)
            job_id, frame, error = ray.get(ready[0])
            if error is None:
                job = by_id[job_id]
                store.write(job_id, frame, {"fn": job.fn, "params": job.params, "label": job.label})
            done(job_id, error)
    finally:
        if started:
            ray.shutdown()


def load_results(jobs: Sequence[Job], store: ResultsStore) -> pd.DataFrame:
    """Concatenate the stored results of ``jobs`` (all must be finished)."""
    missing = [j.id for j in jobs if not store.exists(j.id)]
    if missing:
        raise ValueError(f"{len(missing)} job(s) have no results yet in {store.root} (e.g. {missing[0]}); run the sweep first")
    return store.read_many([j.id for j in unique_jobs(jobs)])
