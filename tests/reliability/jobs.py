"""Job functions and a sweep driver for the process tests (``python -m tests.reliability.jobs``)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import pandas as pd


def tick(x: int, seconds: float = 0.0, log: str = "", seed: int = 0) -> pd.DataFrame:
    """Sleep, then note ``x`` in ``log`` (one line per computation) and return it (``seed``: only a
    name, as a job's seed is to the cost estimates)."""
    if log:
        Path(f"{log}.started.{x}").touch()
    time.sleep(seconds)
    if log:
        with open(log, "a") as f:
            f.write(f"{x} {os.getpid()}\n")
    return pd.DataFrame({"x": [x], "value": [x / 7]})


def oom(marker: str = "") -> pd.DataFrame:
    """SIGKILL this worker, as the kernel's OOM killer would; with ``marker``, only the first time."""
    if marker and Path(marker).exists():
        return pd.DataFrame({"x": [-1]})
    if marker:
        Path(marker).touch()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # never reached


def threads() -> pd.DataFrame:
    import torch

    return pd.DataFrame({"threads": [torch.get_num_threads()]})


def sweep_jobs(n: int, seconds: float, log: str, quick: int = 0):
    from sandbox.jobs.sweep import Job

    return [Job("tests.reliability.jobs:tick", {"x": i, "seconds": 0.0 if i < quick else seconds, "log": log})
            for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    """A sweep of ``n`` tick jobs; exits 130 with one line on Ctrl-C, as the CLI does."""
    from sandbox.jobs.store import ResultsStore
    from sandbox.jobs.sweep import run_sweep

    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--quick", type=int, default=0, help="the first QUICK jobs take no time")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--log", default="")
    args = p.parse_args(argv)
    try:
        report = run_sweep(sweep_jobs(args.n, args.seconds, args.log, args.quick), ResultsStore(args.results),
                           workers=args.workers, progress=False, poll_seconds=0.1)
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume")
        return 130
    print(f"computed={report.computed} elsewhere={report.elsewhere} skipped={report.skipped} "
          f"failed={len(report.failed)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
