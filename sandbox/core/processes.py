"""Process lifecycle: which processes are alive, children that die with their parent, and a local
Ray that dies with the driver that started it.

A local Ray started by ``start_ray`` is shut down on every exit path: ``stop_ray`` (callers'
``finally``), normal exit (atexit), SIGTERM/SIGHUP (a handler), and even SIGKILL: a reaper
process — this file run as a script, standard library only — holds a pipe from the driver and,
when the pipe closes, ends the Ray processes still running (Ray's agents outlive a killed driver).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HOST = socket.gethostname().replace("~", "-")


def start_time(pid: int) -> str | None:
    """A process's start time (clock ticks after boot) on Linux, None where /proc is absent or the
    process is a zombie; with the pid it identifies a process even after its pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in "ZX" else fields[19]


def process_alive(host: str, pid: int, start: str | None = None) -> bool:
    """Whether the process (host, pid[, start time]) still runs; another host's processes cannot be
    checked and count as alive."""
    if host != HOST:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if not Path("/proc").is_dir():
        return True
    now = start_time(pid)
    return now is not None and (start is None or now == start)


def descendants(pid: int) -> set[int]:
    """Live descendants of ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in "ZX":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def die_with_parent(parent: int) -> None:
    """End this process as soon as ``parent`` (the pid that started it) is gone:
    ``PR_SET_PDEATHSIG`` on Linux, a watchdog thread polling ``os.getppid()`` elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        armed = libc.prctl(1, int(signal.SIGKILL)) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        armed = False
    if not armed:
        def watchdog() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watchdog, daemon=True, name="parent-watchdog").start()
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


# ---------------------------------------------------------------------- a local Ray
_hooks: list[bool] = []
_reapers: list[subprocess.Popen] = []


def start_ray(address: str | None = None, num_cpus: int | None = None, progress: bool = False) -> bool:
    """Join Ray at ``address`` or start a local one with ``num_cpus`` (a progress line with
    ``progress``, a one-line error when no cluster answers: ``sandbox.core.ray_start``); True when
    this call started it. A process already joined to a Ray keeps it, but an ``address`` where no
    cluster answers is refused all the same."""
    import ray

    from sandbox.core.ray_start import RayStartTimeout, check_address, init_ray

    if ray.is_initialized():
        check_address(address)
        return False
    before = descendants(os.getpid())
    try:
        init_ray(address, num_cpus, progress=progress)
    except RayStartTimeout:  # ray.init still waits in its thread: end what it started so far
        for pid in sorted(descendants(os.getpid()) - before):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise
    if not _hooks:
        _hooks.append(True)
        atexit.register(stop_ray)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                previous = signal.getsignal(sig)
                if previous is not signal.SIG_IGN:
                    signal.signal(sig, functools.partial(_stop_then, previous))
    started = sorted(descendants(os.getpid()) - before)
    if address is None and started:
        reaper = subprocess.Popen([sys.executable, "-I", __file__], stdin=subprocess.PIPE, text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        reaper.stdin.write(json.dumps([(pid, start_time(pid)) for pid in started]) + "\n")
        reaper.stdin.flush()
        _reapers.append(reaper)
    return True


def _stop_then(previous, signum: int, frame) -> None:
    stop_ray()
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def stop_ray() -> None:
    """Shut down the Ray this process started or joined, and release its reaper."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    while _reapers:
        reaper = _reapers.pop()
        reaper.stdin.close()  # the reaper ends what ray.shutdown left running, then exits
        reaper.wait()


def _reap() -> None:
    """The reaper: wait for the driver's pipe to close, then end the listed Ray processes."""
    targets = json.loads(sys.stdin.readline())
    sys.stdin.read()  # blocks until the driver closes the pipe or dies
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [(pid, start) for pid, start in targets if process_alive(HOST, pid, start)]
        for pid, _ in alive:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.time() + 3
        while alive and time.time() < deadline:
            time.sleep(0.1)
            alive = [(pid, start) for pid, start in alive if process_alive(HOST, pid, start)]
        if not alive:
            return


if __name__ == "__main__":
    _reap()
