"""Start or join Ray with one line of feedback: a progress line while a local Ray starts, a one-line
``ValueError`` when no cluster answers at an address (instead of minutes of retries, a retry
warning a second from Ray's C++ core and a ``ConnectionError`` traceback), and without Ray's
token-authentication notice."""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sys
import tempfile
import threading
from contextlib import contextmanager

from tqdm.auto import tqdm

#: Ray's notice "Token authentication is enabled for this Ray cluster …", logged at every start
AUTH_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
#: logs "Started a local Ray instance." at INFO (the progress line says so already)
WORKER_LOGGER = "ray._private.worker"
NO_CLUSTER_HINT = "start one with `ray start --head` (or leave out --ray-address to start a local Ray)"


def quiet_ray_logs() -> None:
    """Silence Ray's token-authentication notice and its start-up INFO line in this process (its
    warnings about the cluster and all errors still show)."""
    logging.getLogger(AUTH_NOTICE_LOGGER).setLevel(logging.ERROR)
    logging.getLogger(WORKER_LOGGER).setLevel(logging.WARNING)


def check_address(address: str | None, timeout: float = 3.0) -> None:
    """For a ``host:port`` (or ``ray://host:port``) address, fail at once when nothing listens
    there; 'auto' and None are left to Ray."""
    if address is None or address == "auto":
        return
    if not isinstance(address, str):
        raise ValueError(f"--ray-address must be 'auto' or host:port, got {address!r}")
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--ray-address must be 'auto', host:port or ray://host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            if address.startswith("ray://"):
                return  # Ray Client speaks gRPC too, but its handshake is Ray's to make
            conn.sendall(HTTP2_PREFACE)
            answer = conn.recv(9)
    except OSError as err:
        raise ValueError(f"--ray-address {address}: no Ray cluster answers there ({err.strerror or err}); "
                         f"{NO_CLUSTER_HINT}") from None
    if len(answer) < 4 or answer[3] != 0x4:  # a Ray head (its GCS is a gRPC server) answers with SETTINGS
        raise ValueError(f"--ray-address {address}: something answers there, but not a Ray cluster (it does not "
                         f"speak gRPC); {NO_CLUSTER_HINT}")


#: the HTTP/2 client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS frame
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


@contextmanager
def _native_stderr_captured():
    """Send what Ray's C++ core writes to file descriptor 2 (a retry warning per second while it
    looks for a cluster) to a temporary file; yield a stream on the real stderr for our own lines
    and a function returning what was captured."""
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w")
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield terminal, lambda: (captured.seek(0), captured.read().decode(errors="replace"))[1]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            terminal.close()


@contextmanager
def _ticking(desc: str, enabled: bool, file=None):
    """A tqdm line with the elapsed time, refreshed by a thread while the block runs."""
    bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", disable=not enabled, leave=False, file=file)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.5):
            bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


#: how long Ray may take to start or join before the command stops with one line (seconds)
START_TIMEOUT_ENV = "SANDBOX_RAY_START_TIMEOUT"
DEFAULT_START_TIMEOUT = 120.0


class RayStartTimeout(ValueError):
    """Ray did not start (or join) within ``start_timeout()`` seconds: ``ray.init`` still waiting."""


def start_timeout() -> float:
    """``$SANDBOX_RAY_START_TIMEOUT`` seconds (default 120: a local Ray starts in 5-30 s on a loaded
    machine); anything but a finite number > 0 is one line naming the variable."""
    raw = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_START_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"${START_TIMEOUT_ENV} must be a number of seconds > 0, got {raw!r}")
    return value


class _Expired(BaseException):
    """Raised by the start-up timer inside ``ray.init`` (a BaseException: Ray's retry loops catch Exception)."""


def _within(seconds: float, call, where: str, captured) -> None:
    """Run ``call`` (``ray.init``) in this thread, interrupted after ``seconds`` by a SIGALRM timer:
    Ray with no usable network waits minutes in its own retries (240 s until killed, issue 46 R9).
    It must run here, not in a helper thread: Ray starts its GCS and raylet with PR_SET_PDEATHSIG,
    which fires when the *thread* that started them ends. Off the main thread, or when the process
    has a timer of its own running, there is no timer to use and Ray's own waits apply."""
    if (threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer")
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        call()
        return

    def expired(signum, frame):
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        call()
    except _Expired:
        said = [line.strip() for line in captured().splitlines() if line.strip()]
        raise RayStartTimeout(f"{where}: Ray did not start within {seconds:g} s"
                              + (f" (it said: {said[-1][:200]})" if said else "")
                              + "; check this host's network (Ray's processes talk over it) and load, or wait "
                              f"longer: ${START_TIMEOUT_ENV}=SECONDS") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def init_ray(address: str | None = None, num_cpus: int | None = None, progress: bool = True) -> None:
    """``ray.init`` with the feedback above, within ``start_timeout()`` seconds, else one
    ``RayStartTimeout`` line (``sandbox.core.processes.start_ray`` calls it, owns the shutdown on
    every exit path and ends what a timed-out start left running)."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ValueError("Ray is not installed: pip install -e '.[distributed]'") from err
    quiet_ray_logs()
    check_address(address)
    seconds = start_timeout()
    where = f"joining Ray at {address}" if address else "starting a local Ray"
    with _native_stderr_captured() as (terminal, captured):
        try:
            with _ticking(where, progress, terminal):
                _within(seconds, lambda: ray.init(address=address, num_cpus=None if address else num_cpus,
                                                  include_dashboard=False, log_to_driver=False), where, captured)
        except RayStartTimeout:
            raise
        except ConnectionError as err:
            raise ValueError(f"--ray-address {address}: {str(err).splitlines()[0]}; {NO_CLUSTER_HINT}") from None
        except BaseException:  # not ours to judge: show what Ray said
            terminal.write(captured())
            raise


__all__ = ["RayStartTimeout", "check_address", "init_ray", "quiet_ray_logs", "start_timeout"]
