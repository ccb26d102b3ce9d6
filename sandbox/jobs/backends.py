"""Where a sweep's jobs run: in this process (one worker), on local worker processes, or as Ray
tasks. Each backend has ``free``, ``busy``, ``submit(job)``, ``wait(timeout)`` → [(job, alive,
error)] and ``close(now)``; a local job writes its own result, a Ray task's result is written by the
driver (the cluster's nodes need not share a file system). Every result records the job's wall and
CPU seconds.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sandbox.core.usage import recording
from sandbox.jobs.pool import LocalPool, load_in_worker
from sandbox.jobs.store import ResultsStore, job_code

if TYPE_CHECKING:
    from sandbox.jobs.sweep import Job


def _timed(job: Job, stamp: bool = True, **options) -> tuple[pd.DataFrame, dict, dict]:
    """Run ``job`` (``options``: its function's keywords that are not part of the job, e.g.
    ``progress``); its frame, its cost — wall ``seconds``, this process's ``cpu_seconds`` and
    ``ray`` when Ray is up in this process (its workers' CPU time is not counted here): what
    ``sandbox.jobs.costs`` estimates the next sweeps' time from — and the code that made it, with
    the fingerprints of the components it built (``sandbox.core.usage``); with ``stamp=False``
    (nothing will be stored) no code stamp: its fingerprints run canaries, ≈ 0.1 s a run."""
    start, cpu = time.perf_counter(), time.process_time()
    with recording() as used:
        frame = job.run(**options)
    cost = {"seconds": round(time.perf_counter() - start, 3), "cpu_seconds": round(time.process_time() - cpu, 3)}
    ray = sys.modules.get("ray")
    cost = {**cost, "ray": True} if ray is not None and ray.is_initialized() else cost
    return frame, cost, job_code(used) if stamp else {}


def _run_and_write(job: Job, store: ResultsStore | None, **options) -> tuple[pd.DataFrame, Path | None]:
    """Run one job and write its result (atomically) to ``store`` (nowhere without one): its frame
    and its file."""
    frame, cost, code = _timed(job, stamp=store is not None, **options)
    return frame, None if store is None else store.write(job.id, frame, {**job.metadata, **cost}, code)


def _execute(job: Job, root: str) -> str | None:
    """Run one job and write its result (atomically) from this process; the error, if any."""
    try:
        _run_and_write(job, ResultsStore(root))
        return None
    except Exception:  # one failing job must not stop the sweep
        return traceback.format_exc()


def _ray_task(job: Job, plugins: list[str]) -> tuple[pd.DataFrame | None, dict, str | None, dict]:
    failure = load_in_worker(plugins)
    if failure is not None:
        return None, {}, str(failure), {}
    try:
        frame, cost, code = _timed(job)
        return frame, code, None, cost
    except Exception:
        return None, {}, traceback.format_exc(), {}


class InProcess:
    """workers=1: jobs run here, one after the other. A sweep ``submit``s them (a failing job is
    recorded, the others go on); ``sandbox run`` calls ``run(job)``, which returns the job's frame
    and file and lets its error propagate; without a store (``--no-store``) nothing is written.
    ``options``: the job functions' keywords that are not part of a job (``progress``)."""

    def __init__(self, store: ResultsStore | None, **options) -> None:
        self.store, self.options, self.done = store, options, []

    def run(self, job: Job) -> tuple[pd.DataFrame, Path | None]:
        return _run_and_write(job, self.store, **self.options)

    @property
    def free(self) -> bool:
        return not self.done

    @property
    def busy(self) -> bool:
        return bool(self.done)

    def submit(self, job: Job) -> None:
        try:
            self.run(job)
            error = None
        except Exception:  # one failing job must not stop the sweep
            error = traceback.format_exc()
        self.done.append((job, True, error))

    def wait(self, timeout: float | None) -> list:
        done, self.done = self.done, []
        return done

    def close(self, now: bool = False) -> None:
        pass


class LocalProcesses(LocalPool):
    def __init__(self, store: ResultsStore, workers: int, plugins: list[str]) -> None:
        super().__init__(workers, _execute, plugins)
        self.root = str(store.root)

    def submit(self, job: Job) -> None:
        super().submit(job, job, self.root)


class RayTasks:
    """Each job is a Ray task (retried once by Ray if its worker dies); results come back to the
    driver, which writes them (the cluster's nodes need not share a file system)."""

    def __init__(self, store: ResultsStore, workers: int, address: str | None, plugins: list[str]) -> None:
        import ray

        from sandbox.core.processes import start_ray

        self.ray, self.store, self.workers, self.plugins = ray, store, workers, plugins
        self.started = start_ray(address, num_cpus=workers)
        self.remote = ray.remote(max_retries=1)(_ray_task)
        self.refs: dict = {}

    @property
    def free(self) -> bool:
        return len(self.refs) < self.workers

    @property
    def busy(self) -> bool:
        return bool(self.refs)

    def submit(self, job: Job) -> None:
        self.refs[self.remote.options(num_cpus=job.threads).remote(job, self.plugins)] = job

    def wait(self, timeout: float | None) -> list:
        if not self.refs:
            return []
        ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=timeout)
        events = []
        for ref in ready:
            job = self.refs.pop(ref)
            try:
                frame, code, error, cost = self.ray.get(ref)
                if error is None:
                    self.store.write(job.id, frame, {**job.metadata, **cost}, code)
            except Exception:  # the task's worker died twice, or the write failed
                error = traceback.format_exc()
            events.append((job, True, error))
        return events

    def close(self, now: bool = False) -> None:
        for ref in self.refs:
            self.ray.cancel(ref, force=True)
        if self.started:
            from sandbox.core.processes import stop_ray

            stop_ray()
