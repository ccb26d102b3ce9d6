"""Start or join Ray with one line of feedback: a progress line while a local Ray starts, a one-line
``ValueError`` when no cluster answers at an address (instead of minutes of retries and a
``ConnectionError`` traceback), and without Ray's token-authentication notice."""

from __future__ import annotations

import logging
import socket
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
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise ValueError(f"--ray-address {address}: no Ray cluster answers there ({err.strerror or err}); "
                         f"{NO_CLUSTER_HINT}") from None


@contextmanager
def _ticking(desc: str, enabled: bool):
    """A tqdm line with the elapsed time, refreshed by a thread while the block runs."""
    bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", disable=not enabled, leave=False)
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
    """``ray.init`` with the feedback above (``sandbox.runtime.processes.start_ray`` calls it and
    owns the shutdown on every exit path)."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ValueError("Ray is not installed: pip install -e '.[distributed]'") from err
    quiet_ray_logs()
    check_address(address)
    where = f"joining Ray at {address}" if address else "starting a local Ray"
    try:
        with _ticking(where, progress):
            ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                     log_to_driver=False)
    except ConnectionError as err:
        raise ValueError(f"--ray-address {address}: {str(err).splitlines()[0]} {NO_CLUSTER_HINT}") from None


__all__ = ["check_address", "init_ray", "quiet_ray_logs"]
