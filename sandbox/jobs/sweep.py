"""Sweeps: lists of jobs executed by a backend, resumable at any moment.

A ``Job`` is a function reference ``"module:function"`` plus JSON parameters and its torch thread
count; the function returns a tidy DataFrame. Its hash names its results file, so a job function
that moves keeps its old name (``MOVED`` says where it lives now) and every stored result its id. ``run_sweep``
verifies what is stored (checksum, the code that made it), claims each job before computing it
(so concurrent sweeps on one folder compute every job once), runs the rest in this process, on
local worker processes or on Ray, writes each result atomically as soon as it finishes, and never
lets one failing job stop the others. A worker that dies (an OOM kill) is replaced and its job
retried once. Kill it at any moment and rerun: it completes without recomputing or corrupting
anything. Guarantees and their tests: docs/reliability.md, "What a sweep guarantees".
"""

from __future__ import annotations

import importlib
import json
import logging
import numbers
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from sandbox.core.processes import HOST
from sandbox.core.validation import check_choice
from sandbox.jobs import costs
from sandbox.jobs.backends import InProcess, LocalProcesses, RayTasks
from sandbox.jobs.canaries import check_plugin_estimators
from sandbox.jobs.fingerprints import shared_fingerprints
from sandbox.jobs.identity import job_hash
from sandbox.jobs.pool import import_plugins, plugins_from_env
from sandbox.jobs.store import ResultsStore
from sandbox.runtime.config import RunConfig

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
ATTEMPTS = 2  # a job whose worker dies is run once more, then recorded as failed
#: local worker processes per CPU at most: a job is CPU-bound on one thread, so more processes only
#: oversubscribe the machine (1,000 started 30 processes on 2 cores and promised "about 34 s")
WORKERS_PER_CPU = 4
#: Ray tasks in flight at most: a cluster's CPUs are not known before it is joined
MAX_RAY_WORKERS = 4096


def max_workers(backend: str = "local") -> int:
    return MAX_RAY_WORKERS if backend == "ray" else WORKERS_PER_CPU * (os.cpu_count() or 1)


def check_workers(workers, backend: str = "local", name: str = "workers") -> None:
    """``workers``: None (the CPU count) or an integer in 1..``max_workers(backend)`` — not a bool."""
    high = max_workers(backend)
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or not 1 <= workers <= high:
        why = (f"{WORKERS_PER_CPU} per CPU of this machine's {os.cpu_count()}" if backend != "ray"
               else "Ray tasks in flight")
        raise ValueError(f"{name} must be None or an integer in 1..{high} ({why}), got {workers!r}")


#: job functions under the name their results were stored by → where they live now; the name, not
#: the place, is hashed into a job's id (training runs were "sandbox.runtime.sweep:train_job" before
#: job execution left the runtime), so stored results keep their ids
TRAIN_JOB = "sandbox.runtime.sweep:train_job"
MOVED = {TRAIN_JOB: "sandbox.jobs.sweep:train_job"}


@dataclass(frozen=True)
class Job:
    """``fn(**params) -> DataFrame`` on ``threads`` torch intra-op threads (part of its identity:
    cached numbers never depend on the pool size); ``label`` names it in plots (not hashed)."""

    fn: str
    params: dict = field(default_factory=dict)
    label: str = ""
    threads: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.fn, str) or ":" not in self.fn:
            raise ValueError(f"job fn must look like 'package.module:function', got {self.fn!r}")
        if not isinstance(self.params, dict):
            raise ValueError(f"job params must be a dict, got {type(self.params).__name__}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"job threads must be an integer >= 1, got {self.threads!r}")

    @property
    def id(self) -> str:
        return job_hash(self.fn, self.params, self.threads)  # (what a stored result's identity is checked by)

    @classmethod
    def training(cls, config: RunConfig) -> Job:
        """A training run of the actor-learner loop; its id is the run config's hash."""
        params = config.to_dict()
        params.pop("label")
        return cls(TRAIN_JOB, params, config.label or config.estimator)

    def resolve(self):
        module, _, name = MOVED.get(self.fn, self.fn).partition(":")
        return getattr(importlib.import_module(module), name)

    def run(self, **options: Any) -> pd.DataFrame:
        """``fn(**params, **options)`` on ``threads`` threads; ``options`` are keywords of the
        function that are not part of the job (``progress``): they never change its numbers."""
        with intra_op_threads(self.threads):
            frame = self.resolve()(**self.params, **options)
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"job {self.fn} must return a pandas DataFrame, got {type(frame).__name__}")
        frame = frame.copy()
        frame["job_id"] = self.id
        if self.label or "label" not in frame.columns:
            frame["label"] = self.label
        return frame

    @property
    def metadata(self) -> dict:
        return {"fn": self.fn, "params": self.params, "label": self.label, "threads": self.threads}


def train_job(progress: bool = False, **params: Any) -> pd.DataFrame:
    """Job function of a training run (parameters: the RunConfig fields; ``progress``: a bar over
    its steps)."""
    from sandbox.runtime.loop import train

    return train(RunConfig.from_dict(params), progress=progress)


@dataclass
class SweepReport:
    total: int
    skipped: int  # finished (and verified) before this call
    computed: int
    failed: dict[str, str]  # job id → error
    recomputed: dict[str, str] = field(default_factory=dict)  # job id → 'corrupt' | 'stale' (other code)
    accepted_stale: list[str] = field(default_factory=list)  # kept although made by other code
    elsewhere: int = 0  # finished meanwhile by another sweep on the same folder
    changed: dict[str, int] = field(default_factory=dict)  # component whose numbers changed → results recomputed

    @property
    def ok(self) -> bool:
        return not self.failed


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


def unique_jobs(jobs: Sequence[Job]) -> list[Job]:
    seen: dict[str, Job] = {}
    for job in jobs:
        if not isinstance(job, Job):
            raise ValueError(f"jobs must be Job instances, got {type(job).__name__}")
        seen.setdefault(job.id, job)
    return list(seen.values())


@shared_fingerprints()
def run_sweep(jobs: Sequence[Job], store: ResultsStore, backend: str = "local", workers: int | None = None,
              progress: bool = True, ray_address: str | None = None, desc: str = "sweep",
              plugins: Sequence[str] | None = None, accept_stale_code: bool | Collection[str] | None = None,
              poll_seconds: float = 0.2, lock_timeout: float | None = None,
              announce: bool | Callable[[costs.Plan, set[str]], str] = True) -> SweepReport:
    """Run every job whose verified result is not in ``store`` yet.

    Stored results that are corrupt, or were made by other code (another package version or
    ``sandbox/`` source), are recomputed; ``accept_stale_code=True`` keeps the latter (default:
    ``$SANDBOX_ACCEPT_STALE_CODE`` = 1, which ``sandbox sweep|reproduce --accept-stale-code`` sets), a
    collection of job ids keeps those (results restored from committed data). ``plugins``
    (default ``$SANDBOX_PLUGINS``) are imported here and in every worker. A job that another live
    sweep on this host has claimed is waited for (polling every ``poll_seconds``); one claimed from
    another host, whose process cannot be checked, for ``lock_timeout`` seconds (default
    ``$SANDBOX_LOCK_TIMEOUT`` or 600, which ``--lock-timeout`` sets), with a warning, then recorded as
    failed with what to do. Ctrl-C stops every worker at once, keeps every finished result and
    raises ``KeyboardInterrupt``. With ``progress`` and ``announce``, a line first says how many jobs
    there are, how many are finished and roughly how long the rest take (``sandbox.jobs.costs``);
    a callable ``announce(plan, finished_ids)`` says it instead. This process and its workers
    share the fingerprints they compute (``shared_fingerprints``).
    """
    check_choice("backend", backend, BACKENDS)
    if not isinstance(store, ResultsStore):
        raise ValueError(f"store must be a ResultsStore, got {type(store).__name__}")
    check_workers(workers, backend)
    if not poll_seconds > 0:
        raise ValueError(f"poll_seconds must be > 0, got {poll_seconds!r}")
    lock_timeout = lock_timeout_from_env() if lock_timeout is None else lock_timeout
    if not (isinstance(lock_timeout, (int, float)) and 0 <= lock_timeout < float("inf")):
        raise ValueError(f"lock_timeout must be a number of seconds ≥ 0, got {lock_timeout!r}")
    jobs = unique_jobs(jobs)
    if accept_stale_code is None:
        accept_stale_code = os.environ.get("SANDBOX_ACCEPT_STALE_CODE", "") == "1"
    plugins = plugins_from_env() if plugins is None else plugins
    import_plugins(plugins)
    plugins = list(plugins)
    check_plugin_estimators(jobs)  # once, on a toy batch, before any job: not a traceback per job
    for tmp in store.clean_temp():
        log.info("removed %s, left by a killed writer", tmp.name)
    report = SweepReport(total=len(jobs), skipped=0, computed=0, failed={})
    todo = []
    keep_stale = (lambda job_id: accept_stale_code) if isinstance(accept_stale_code, bool) \
        else (lambda job_id: job_id in accept_stale_code)
    verdicts = {}
    for job in jobs:
        verdict = store.verdict(job.id)
        state = verdict.state
        if state == "ok" or (state == "stale" and keep_stale(job.id)):
            report.skipped += 1
            if state == "stale":
                report.accepted_stale.append(job.id)
            continue
        if state != "missing":
            report.recomputed[job.id] = state
            verdicts[job.id] = verdict
        todo.append(job)
    _log_verdicts(report, verdicts)
    if progress and announce and todo:
        finished = {j.id for j in jobs} - {j.id for j in todo}
        plan = costs.plan(jobs, finished, workers, store)
        costs.announce(announce(plan, finished) if callable(announce) else plan.line(desc))
    if not todo:
        return report
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    if backend == "ray":
        runner = RayTasks(store, workers, ray_address, plugins)
    else:
        runner = InProcess(store) if workers == 1 else LocalProcesses(store, workers, plugins)
    bar = tqdm(total=len(todo), desc=desc, disable=not progress, unit="job")
    mine: set[str] = set()
    interrupted = False
    try:
        _drive(todo, store, runner, report, bar, mine, poll_seconds, lock_timeout)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        runner.close(now=interrupted)
        for job_id in mine:
            store.release(job_id)
        bar.close()
        if interrupted:
            log.info("sweep interrupted: %d job(s) finished and kept; rerun to resume", report.computed)
    return report


def _log_verdicts(report: SweepReport, verdicts: dict) -> None:
    """One warning per component whose numbers changed (with the results recomputed for it), one
    for the other stale results, one for the kept and one for the corrupt ones."""
    by_component: dict[str, list[str]] = {}
    other: dict[str, list[str]] = {}
    for job_id, verdict in verdicts.items():
        if verdict.state != "stale":
            continue
        for key in verdict.changed:
            by_component.setdefault(key, []).append(job_id)
        if not verdict.changed:
            other.setdefault(verdict.why, []).append(job_id)
    report.changed = {key: len(ids) for key, ids in by_component.items()}
    for key, ids in sorted(by_component.items()):
        old, new = next(verdicts[j].changed[key] for j in ids)
        log.warning("the numbers of %s changed (fingerprint %s → %s): recomputing the %d result(s) made with "
                    "the old ones (accept_stale_code=True keeps them): %s", key, old, new, len(ids), ", ".join(ids))
    for why, ids in other.items():
        log.warning("%d stored result(s) are stale (%s); recomputing them (accept_stale_code=True keeps them): %s",
                    len(ids), why, ", ".join(ids))
    if report.accepted_stale:
        log.warning("keeping %d result(s) made by other code (accept_stale_code): %s",
                    len(report.accepted_stale), ", ".join(report.accepted_stale))
    corrupt = [j for j, v in verdicts.items() if v.state == "corrupt"]
    if corrupt:
        log.warning("%d stored result(s) are corrupt (%s); recomputing them: %s", len(corrupt),
                    verdicts[corrupt[0]].why, ", ".join(corrupt))


def kept_from_env() -> set[str] | None:
    """The job ids ``$SANDBOX_KEEP`` names (a JSON list file ``sandbox reproduce`` writes for a
    notebook): restored committed results the notebook's sweep keeps whatever code made them, as
    reproduce's own sweep does; None without it."""
    path = os.environ.get("SANDBOX_KEEP")
    if not path:
        return None
    try:
        ids = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"SANDBOX_KEEP: {path!r} is not a readable JSON list of job ids ({err})") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"SANDBOX_KEEP: {path!r} must hold a JSON list of job ids")
    return set(ids)


def lock_timeout_from_env() -> float:
    """``$SANDBOX_LOCK_TIMEOUT`` (seconds to wait for a job another host holds), default 600."""
    text = os.environ.get("SANDBOX_LOCK_TIMEOUT", "600")
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(f"SANDBOX_LOCK_TIMEOUT must be a number of seconds ≥ 0, got {text!r}")
    return value


def _held_elsewhere(job: Job, store: ResultsStore, since: dict[str, float], lock_timeout: float) -> str | None:
    """Say (once) that another process holds ``job``; for another host's lock, after ``lock_timeout``
    seconds of waiting, the failure to record: what to do."""
    first = job.id not in since
    waited = time.monotonic() - since.setdefault(job.id, time.monotonic())
    owner, lock = store.lock_owner(job.id) or {}, store.lock_path(job.id)
    if owner.get("host", HOST) == HOST:
        if first:
            log.info("job %s is claimed by another live process (%s); waiting for it", job.id, lock)
        return None
    who = f"pid {owner.get('pid')} on host {owner['host']}"
    if first:
        log.warning("job %s is claimed by %s (lock %s, taken %s); waiting up to %g s for it "
                    "(--lock-timeout)", job.id, who, lock,
                    time.strftime("%Y-%m-%d %H:%M", time.localtime(owner.get("since", 0))), lock_timeout)
    if waited < lock_timeout:
        return None
    return (f"still claimed by {who} after {waited:.0f} s: if that host is gone, remove the lock file {lock} "
            f"and rerun; if it is still computing, rerun later or wait longer with --lock-timeout")


def _drive(todo: list[Job], store: ResultsStore, runner, report: SweepReport, bar, mine: set[str],
           poll_seconds: float, lock_timeout: float) -> None:
    """Claim, submit and collect until every job is finished here, finished elsewhere or failed."""
    queue, waiting, attempts, since = deque(todo), [], Counter(), {}
    while queue or waiting or runner.busy:
        while queue and runner.free:
            job = queue.popleft()
            if not store.claim(job.id):
                gave_up = _held_elsewhere(job, store, since, lock_timeout)
                if gave_up is None:
                    waiting.append(job)  # another live sweep computes it
                    continue
                report.failed[job.id] = gave_up
                log.error("job %s %s", job.id, gave_up)
                bar.update(1)
                continue
            state = store.state(job.id)
            if state == "ok":
                store.release(job.id)  # finished meanwhile by another sweep
                report.elsewhere += 1
                bar.update(1)
                continue
            if state == "corrupt":
                store.discard(job.id)
            mine.add(job.id)
            runner.submit(job)
        if not runner.busy:  # only jobs that other sweeps hold are left: look again shortly
            time.sleep(poll_seconds)
        for job, alive, error in runner.wait(poll_seconds if waiting else None) if runner.busy else ():
            attempts[job.id] += 1
            if not alive and attempts[job.id] < ATTEMPTS:
                log.warning("job %s: %s; running it again", job.id, error)
                queue.appendleft(job)
                continue
            if not alive:
                error = f"{error}, {ATTEMPTS} times: recorded as failed"
            if error is None:
                report.computed += 1
            else:
                report.failed[job.id] = error
                log.error("job %s%s failed:%s%s", job.id, f" ({job.label})" if job.label else "",
                          "\n" if "\n" in error.strip() else " ", error)  # a plugin's failure: one line
            store.release(job.id)
            mine.discard(job.id)
            bar.update(1)
        queue.extend(waiting)
        waiting.clear()


def load_results(jobs: Sequence[Job], store: ResultsStore) -> pd.DataFrame:
    """Concatenate the stored (verified) results of ``jobs`` (all must be finished)."""
    missing = [j.id for j in jobs if not store.exists(j.id)]
    if missing:
        raise ValueError(f"{len(missing)} job(s) have no results yet in {store.root} (e.g. {missing[0]}); run the sweep first")
    return store.read_many([j.id for j in unique_jobs(jobs)])
