"""Executing the figures' notebooks: each jupytext ``.py`` in a fresh kernel, several side by side.

A notebook runs in its own kernel process, whose environment is this process's plus the
``SANDBOX_*`` settings it is given (this process's environment is never changed, so notebooks can
run in threads side by side). ``execute_notebooks`` runs up to ``workers`` of them at a time
(``tests/test_notebook_execution.py``; two at a time, with the run's shared fingerprints, the quick main job went 13.4 →
9.9 min on 2 idle cores, ``sandbox/jobs/job_costs.json``'s notes). Ctrl-C stops
every running kernel at once and raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from tqdm.auto import tqdm

#: the kernel managers of the notebooks now running (shut down together on Ctrl-C)
_LIVE: set = set()
_LIVE_LOCK = threading.Lock()


def _kernel_manager(folder: str):
    """A kernel on IPC sockets in ``folder`` where the OS has them (no "TCP without encryption"
    warning, nothing listening on the network), TCP elsewhere."""
    from jupyter_client.manager import KernelManager

    if os.name == "posix":
        return KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(folder, "kernel"))
    return KernelManager(kernel_name="python3")


def stop_running_kernels() -> None:
    """Shut down every notebook kernel this process is running (Ctrl-C)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for km in live:
        if km.has_kernel:
            km.shutdown_kernel(now=True)


def _wait(alive: Callable[[], bool]) -> None:
    """Wait while ``alive()``, in short slices so that Ctrl-C reaches this thread at once; on Ctrl-C
    every running kernel is shut down and ``KeyboardInterrupt`` raised."""
    try:
        while alive():
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_running_kernels()
        raise


def execute_notebook(source: Path, output: Path | None, env: dict[str, str], timeout: int = 3600,
                     progress: bool = True) -> None:
    """Execute a jupytext ``.py`` notebook in a fresh kernel whose environment includes ``env``;
    the executed notebook is written to ``output`` (even when a cell fails).

    The client runs in a helper thread, so that Ctrl-C reaches the calling thread at once (when it
    is the main thread): the kernels are shut down and ``KeyboardInterrupt`` raised (never reported
    as a failing cell)."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    source = Path(source)
    if not source.is_file():
        raise ValueError(f"notebook {source} does not exist")
    notebook = jupytext.read(source)
    cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    bar = tqdm(total=cells, desc=f"{source.stem} notebook", unit="cell", disable=not progress, leave=False)
    failure: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="sandbox-kernel-") as folder:
        km = _kernel_manager(folder)
        client = NotebookClient(notebook, km=km, timeout=timeout, resources={"metadata": {"path": str(source.parent.parent)}},
                                on_cell_executed=lambda **_: bar.update())

        def run() -> None:
            try:  # we own the kernel manager: cleanup_kc shuts the kernel down
                client.execute(cleanup_kc=True, env={**os.environ, **env})
            except BaseException as err:  # handed to the calling thread
                failure.append(err)

        thread = threading.Thread(target=run, name=f"notebook {source.stem}", daemon=True)
        with _LIVE_LOCK:
            _LIVE.add(km)
        thread.start()
        try:
            _wait(thread.is_alive)
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(km)
            bar.close()
            if output is not None:
                output.parent.mkdir(parents=True, exist_ok=True)
                jupytext.write(notebook, output, fmt="ipynb")
    if failure:
        err = failure[0]
        if isinstance(err, CellExecutionError) and err.ename == "KeyboardInterrupt":
            raise KeyboardInterrupt from err  # the kernel got the terminal's Ctrl-C first
        raise err


def execute_notebooks(calls: Sequence[Callable[[], object]], workers: int = 1) -> list[tuple[object, BaseException | None, float]]:
    """Run ``calls`` (each executes one notebook), up to ``workers`` at a time; returns, in order,
    each call's (value, exception or None, seconds). One call's failure does not stop the others;
    a ``KeyboardInterrupt`` in any (or Ctrl-C here) stops every kernel and is raised."""
    if workers < 1:
        raise ValueError(f"workers must be an int ≥ 1, got {workers!r}")

    def timed(call: Callable[[], object]) -> tuple[object, BaseException | None, float]:
        start = time.perf_counter()
        try:
            return call(), None, time.perf_counter() - start
        except Exception as err:  # noqa: BLE001 — a failed notebook is an outcome; KeyboardInterrupt is not
            return None, err, time.perf_counter() - start

    if workers == 1 or len(calls) <= 1:
        return [timed(call) for call in calls]
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="notebooks")
    futures: list[Future] = [pool.submit(timed, call) for call in calls]
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()  # a KeyboardInterrupt inside a call propagates here
    except BaseException:
        stop_running_kernels()  # their notebooks' threads then end on their own
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [future.result() for future in futures]

__all__ = ["execute_notebook", "execute_notebooks", "stop_running_kernels"]
