"""The cost of a first ``sandbox check`` on a fresh clone: one check on the quick battery into an
empty results folder, against the target of ≤ 5 minutes on 2 cores (issue 34).

The built-ins' results on ``quick`` are committed (``sandbox/scoring/builtins-quick.parquet``) and
restored into the fresh folder by the check itself, so it computes only the configuration's own
jobs and, on its deployment cells, the losses its framework can select (the default
``--deployment-against framework``). Wall time, on ``--workers`` processes (one torch thread
each); on a shared machine it includes waiting for the CPU, so the computed jobs' own CPU seconds
(stored with every job) are printed too, and their time on 2 idle cores. Then the same check
again in the same folder (warm: every job stored), with its dry run's estimate and wall time.

``--export`` instead (re)writes the committed file from a results folder holding the built-ins on
``quick`` (computing those that are missing first: a long job, run it niced on one worker):

    python benchmarks/check.py [--config tests/check/fixtures/verl_dapo_async.yaml] [--precision bf16]
                               [--workers 2] [--results DIR (default: a fresh temporary folder)]
    nice -n 19 python benchmarks/check.py --export --results DIR --workers 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import tempfile
import time
from pathlib import Path

import pandas as pd

from sandbox.cli import main as sandbox_main
from sandbox.scoring import builtin_data
from sandbox.scoring.battery import as_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, make_recipe
from sandbox.scoring.runner import default_store, run_battery

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "check" / "fixtures" / "verl_dapo_async.yaml"
TARGET_MIN = 5.0


def estimate_s(config: str, precision: str, workers: int, results: str) -> float:
    """What ``sandbox check --dry-run`` promises, in seconds (its "in all" line's sum of both batteries)."""
    from sandbox.check.api import dry_run

    lines = dry_run(config, "quick", precision=precision, workers=workers, results=results)
    seconds = 0.0
    for line in lines[:-1]:  # the two batteries' lines; the last is their sum, printed
        match = re.search(r"about ([\d.]+) (s|min|h) on", line)
        if match:
            seconds += float(match[1]) * {"s": 1, "min": 60, "h": 3600}[match[2]]
    return seconds


def _check(config: str, precision: str, workers: int, results: str, out: str) -> tuple[float, float, str]:
    """Run ``sandbox check CONFIG --battery quick …`` as a user types it: (the dry run's estimate, the
    wall seconds, what it printed); a non-zero exit stops the benchmark."""
    argv = ["check", config, "--battery", "quick", "--precision", precision, "--workers", str(workers),
            "--results", results, "--out", out, "--quiet"]
    estimate = estimate_s(config, precision, workers, results)
    printed = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        code = sandbox_main(argv)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"sandbox {' '.join(argv)} exited {code}")
    return estimate, wall, printed.getvalue()


def first_check(config: str, precision: str, workers: int, results: str, out: str) -> tuple[dict, str]:
    """``sandbox check CONFIG --precision P --workers W --results R --out O`` as a user types it; the
    row (with the dry run's estimate beside the measured time, and the load) and what it printed."""
    load = os.getloadavg()[0]
    estimate, wall, printed = _check(config, precision, workers, results, out)
    row = builtin_data.first_run(default_store(results), as_battery("quick"))
    cpu = row["computed cpu_s"]
    row |= {"computed cpu_s": round(cpu, 1), "estimate_s": round(estimate, 1), "wall_s": round(wall, 1),
            "wall_min": round(wall / 60, 2), "wall/estimate": round(wall / max(estimate, 1e-9), 2),
            "cpu/workers/estimate": round(cpu / workers / max(estimate, 1e-9), 2),
            "load before": round(load, 1), "load after": round(os.getloadavg()[0], 1)}
    return row, printed


def warm_check(config: str, precision: str, workers: int, results: str, out: str) -> dict:
    """The same check again in the results folder a first check filled: the dry run's estimate, the
    wall time and the jobs it computed (none expected)."""
    estimate, wall, printed = _check(config, precision, workers, results, out)
    computed = sum(int(n) for n in re.findall(r"(\d+) computed", printed))
    return {"estimate_s": estimate, "wall_s": wall, "computed": computed}


def export(results: str, workers: int) -> None:
    battery = as_battery("quick")
    start = time.perf_counter()
    store = default_store(results)
    _, report = run_battery(battery, [(make_recipe(m), ()) for m in DEFAULT_AGAINST], store, workers=workers,
                            progress=False)
    path = builtin_data.export(battery, store)
    print(f"built-ins on quick: {report.total} jobs, {report.computed} computed in "
          f"{(time.perf_counter() - start) / 60:.1f} min on {workers} worker(s); wrote {path} "
          f"({path.stat().st_size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(FIXTURE))
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "off"],
                        help="'bf16' (default: the most cells) or 'off'")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default=None)
    parser.add_argument("--export", action="store_true", help="write the committed built-ins from --results")
    parser.add_argument("--show", action="store_true", help="print what the check printed (docs/check.md's output)")
    args = parser.parse_args()
    if args.export:
        if args.results is None:
            parser.error("--export needs --results (the folder holding, or to hold, the built-ins)")
        export(args.results, args.workers)
        return
    with tempfile.TemporaryDirectory() as fresh:
        row, printed = first_check(args.config, args.precision, args.workers, args.results or f"{fresh}/results",
                                   f"{fresh}/out")
        warm = warm_check(args.config, args.precision, args.workers, args.results or f"{fresh}/results",
                          f"{fresh}/out-warm")
    if args.show:
        print(printed)
    print(f"sandbox check {Path(args.config).name} --battery quick --precision {args.precision}, "
          f"{args.workers} workers, a fresh results folder")
    print(pd.DataFrame([row]).to_string(index=False))
    idle = row["computed cpu_s"] / (60 * 2)
    verdict = "PASS" if min(row["wall_min"], idle) <= TARGET_MIN else "FAIL"
    honest = "within" if row["cpu/workers/estimate"] <= 1.5 and row["cpu/workers/estimate"] >= 1 / 1.5 else "NOT within"
    print(f"\nestimate (the dry run's): {row['estimate_s'] / 60:.2f} min; measured: {row['wall_min']:.2f} min of wall "
          f"time (× {row['wall/estimate']}, load {row['load before']} → {row['load after']}), the jobs' CPU time over "
          f"{args.workers} worker(s) × {row['cpu/workers/estimate']} of the estimate: {honest} 1.5×")
    print(f"first check: {row['wall_min']:.2f} min of wall time; its {row['computed']} computed jobs took "
          f"{row['computed cpu_s']:.0f} CPU-s, {idle:.1f} min on 2 idle cores (target ≤ {TARGET_MIN:g} min on 2 "
          f"cores): {verdict}")
    print(f"warm (the same check again, every job stored): estimate {warm['estimate_s']:.0f} s, measured "
          f"{warm['wall_s']:.1f} s of wall time, {warm['computed']} job(s) computed")


if __name__ == "__main__":
    main()
