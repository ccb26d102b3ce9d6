"""The cost of a first ``sandbox score NEW --battery quick`` on a fresh clone: a one-file plugin
estimator (the README's ``clipped_adv_pg``) scored into an empty results folder, as a user types it,
against the target of ≤ 2 minutes on 2 idle cores (issue 47, item 8).

The built-ins' results on ``quick`` ship with the package (``sandbox/scoring/builtins-quick.parquet``,
``sandbox.scoring.builtin_data``) and are restored by the score itself, so it computes only the new
estimator's jobs. Wall time on ``--workers`` processes (one torch thread each) includes waiting for
the CPU on a shared machine, so the computed jobs' own CPU seconds (stored with every job) are
printed too, and their time on 2 idle cores (CPU / 2). The baseline, measured in the same run: the
stored CPU seconds of the built-in jobs a first score computed before they shipped.

    python benchmarks/first_score.py [--workers 2] [--results DIR (default: a fresh temporary folder)]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from sandbox.scoring import builtin_data
from sandbox.scoring.battery import as_battery
from sandbox.scoring.runner import default_store

TARGET_MIN = 2.0
#: the README's one-file plugin, as a user saves it
PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "my_estimators.py"


def first_score(folder: Path, results: Path, workers: int) -> tuple[dict, str]:
    """``sandbox score clipped_adv_pg --plugin FILE --set c=0.5 --battery quick`` in a fresh process;
    the row and what it printed."""
    argv = [sys.executable, "-m", "sandbox.cli", "score", "clipped_adv_pg", "--plugin", str(PLUGIN), "--set", "c=0.5",
            "--battery", "quick", "--workers", str(workers), "--results", str(results), "--out", str(folder / "card"),
            "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"sandbox score exited {done.returncode}: {done.stderr.strip()[-600:]}")
    row = builtin_data.first_run(default_store(results), as_battery("quick"))
    row |= {"computed cpu_s": round(row["computed cpu_s"], 1),
            "process cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "wall_s": round(wall, 1), "wall_min": round(wall / 60, 2)}
    return row, done.stdout


def shipped_cpu() -> tuple[int, float]:
    """The built-in jobs on ``quick`` that ship, and their stored CPU seconds (what a first score
    computed before they shipped)."""
    by_env = builtin_data.committed_costs(as_battery("quick"))
    return sum(len(v) for v in by_env.values()), sum(sum(v) for v in by_env.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default=None)
    parser.add_argument("--show", action="store_true", help="print what the score printed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as fresh:
        results = Path(args.results) if args.results else Path(fresh) / "results"
        row, printed = first_score(Path(fresh), results, args.workers)
    if args.show:
        print(printed)
    n_builtin, builtin_cpu = shipped_cpu()
    print(f"sandbox score clipped_adv_pg --plugin my_estimators.py --battery quick, {args.workers} workers, "
          f"a fresh results folder")
    print(pd.DataFrame([row]).to_string(index=False))
    idle = row["computed cpu_s"] / (60 * 2)
    before = (row["computed cpu_s"] + builtin_cpu) / (60 * 2)
    verdict = "PASS" if min(row["wall_min"], idle) <= TARGET_MIN else "FAIL"
    print(f"\nfirst score: {row['wall_min']:.2f} min of wall time; its {row['computed']} computed jobs took "
          f"{row['computed cpu_s']:.0f} CPU-s, {idle:.1f} min on 2 idle cores (target ≤ {TARGET_MIN:g} min): {verdict}")
    print(f"before the built-ins shipped: {row['computed'] + n_builtin} jobs, {row['computed cpu_s'] + builtin_cpu:.0f} "
          f"CPU-s ({n_builtin} built-in jobs: {builtin_cpu:.0f} CPU-s stored with them), {before:.1f} min on 2 idle "
          f"cores: {before / idle if idle else float('nan'):.1f}× this")


if __name__ == "__main__":
    main()
