"""Local worker processes for sweeps; every worker imports the plugins (``sandbox.core.plugins``).

``LocalPool`` keeps up to ``size`` spawned processes, each running one task at a time, so it
always knows which task a worker was running when it died (an OOM kill takes one task, not the
sweep). Workers ignore SIGINT (the driver stops them: one Ctrl-C, no worker tracebacks), import the
plugins before their first task, and die with their parent (``PR_SET_PDEATHSIG`` on Linux, a
watchdog thread polling ``os.getppid()`` elsewhere), so a killed driver leaves no orphans.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_any
from typing import Any

from sandbox.core.plugins import PLUGINS_ENV, import_plugins, plugins_from_env
from sandbox.core.processes import die_with_parent


class PluginFailure(str):
    """A worker's answer to every task when a plugin failed to load in it: one line naming the
    plugin and the error (issue 46, R10: a plugin that failed only in the workers printed a raw
    traceback per worker, and each job died as "worker process exited with code 1")."""


def load_in_worker(plugins: Sequence[str]) -> PluginFailure | None:
    """Import ``plugins`` in a worker process; the failure of the first that fails, as one line."""
    for spec in plugins:
        try:
            import_plugins([spec])
        except BaseException as err:  # noqa: BLE001 — a SystemExit included: name it, no traceback
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            return PluginFailure(f"plugin {spec!r} failed to load in worker process {os.getpid()} (it loaded in "
                                 f"the driver): {type(err).__name__}: {first}")
    return None


def _worker_main(conn, parent: int, fn: Callable, plugins: Sequence[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    failure = load_in_worker(plugins)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(failure if failure is not None else fn(*task))


def describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (e.g. killed for memory)" if -code == signal.SIGKILL else ""
        return f"worker process killed by {name}{hint}"
    return f"worker process exited with code {code}"


class _Worker:
    def __init__(self, ctx, fn: Callable, plugins: Sequence[str]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, os.getpid(), fn, list(plugins)),
                                   name="sandbox-sweep-worker")
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:  # born ignoring SIGINT: a Ctrl-C during its start-up prints nothing either
            self.process.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        child.close()
        self.key: Any = None


class LocalPool:
    """Up to ``size`` spawned worker processes running ``fn(*args)``, one task each at a time."""

    def __init__(self, size: int, fn: Callable, plugins: Sequence[str] = ()) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an integer >= 1, got {size!r}")
        self.size, self.fn, self.plugins = size, fn, list(plugins)
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker] = []

    @property
    def free(self) -> bool:
        return len(self._workers) < self.size or any(w.key is None for w in self._workers)

    @property
    def busy(self) -> bool:
        return any(w.key is not None for w in self._workers)

    def submit(self, key: Any, *args: Any) -> None:
        worker = next((w for w in self._workers if w.key is None), None)
        if worker is None:
            if len(self._workers) >= self.size:
                raise ValueError("submit needs a free worker (check LocalPool.free first)")
            worker = _Worker(self._ctx, self.fn, self.plugins)
            self._workers.append(worker)
        worker.conn.send(args)
        worker.key = key

    def wait(self, timeout: float | None = None) -> list[tuple[Any, bool, Any]]:
        """Finished tasks as (key, True, result), or (key, False, why) for a worker that died
        running it (the worker is replaced by the next ``submit``)."""
        busy = [w for w in self._workers if w.key is not None]
        if not busy:
            if timeout:
                time.sleep(timeout)
            return []
        ready = set(wait_any([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout))
        events = []
        for w in busy:
            if w.conn not in ready and w.process.sentinel not in ready:
                continue
            try:
                answered = w.conn.poll()
                if answered:
                    events.append((w.key, True, w.conn.recv()))
            except (EOFError, OSError):
                answered = False
            if not answered:
                w.process.join(5)
                events.append((w.key, False, describe_exit(w.process.exitcode)))
            w.key = None
            if not w.process.is_alive():  # died (perhaps right after answering): replace it later
                w.process.join(5)
                w.conn.close()
                self._workers.remove(w)
        return events

    def close(self, now: bool = False) -> None:
        """Stop every worker: idle ones are asked to exit; with ``now`` (an interrupt) all are
        terminated at once."""
        for w in self._workers:
            try:
                if now or w.key is not None:
                    w.process.terminate()
                else:
                    w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.process.join(5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
        self._workers = []


__all__ = ["PLUGINS_ENV", "LocalPool", "PluginFailure", "describe_exit", "import_plugins", "load_in_worker",
           "plugins_from_env"]
