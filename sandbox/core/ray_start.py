"""Start or join Ray with one line of feedback: a progress line while a local Ray starts, a one-line
``ValueError`` when no cluster answers at an address (instead of minutes of retries, a retry
warning a second from Ray's C++ core and a ``ConnectionError`` traceback), and without Ray's
token-authentication notice."""

from __future__ import annotations

import logging
import os
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


def init_ray(address: str | None = None, num_cpus: int | None = None, progress: bool = True) -> None:
    """``ray.init`` with the feedback above (``sandbox.core.processes.start_ray`` calls it and
    owns the shutdown on every exit path)."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ValueError("Ray is not installed: pip install -e '.[distributed]'") from err
    quiet_ray_logs()
    check_address(address)
    where = f"joining Ray at {address}" if address else "starting a local Ray"
    with _native_stderr_captured() as (terminal, captured):
        try:
            with _ticking(where, progress, terminal):
                ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                         log_to_driver=False)
        except ConnectionError as err:
            raise ValueError(f"--ray-address {address}: {str(err).splitlines()[0]}; {NO_CLUSTER_HINT}") from None
        except BaseException:  # not ours to judge: show what Ray said
            terminal.write(captured())
            raise


__all__ = ["check_address", "init_ray", "quiet_ray_logs"]
