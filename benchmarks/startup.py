"""The start-up of ``sandbox run``, end to end: the README's bandit example (8 seeds, 16 steps stale)
with ``--steps`` small enough that its training takes ≈ 0.7 s, as a user types it, in a fresh
process on one thread, ``--repeats`` times, in turns with the other commands timed (so that a load
that changes meanwhile weighs on every row alike; issue 47: start-up ≤ 2 s on an idle core).

Start-up is everything but the training — imports, the argument parser, validation, building the
run, the report: the process's time minus the loop's own ``wall_time`` (the run's per-step frame,
written with ``--out``), and, with no subtraction, the whole time of the same run with ``steps=0``
(start-up, one evaluation and the report); a one-seed run, whose report needs no t-interval
(no scipy), is timed too. Baselines measured in the same run: ``python -c "import
torch"`` (the floor of any run) and, with ``--against REV``, the same command on the sandbox of
another commit (``git archive`` into a temporary folder, imported through ``PYTHONPATH``). On a
shared machine wall time includes waiting for a CPU, so each row gives the process's CPU seconds
(user + sys, ``resource.getrusage``) too; the medians are printed, and the minima, and the load
average before and after.

Python's bytecode is cached as on a user's machine after the first run (``PYTHONPYCACHEPREFIX``, a
temporary folder, filled by one untimed run of each command): with ``PYTHONDONTWRITEBYTECODE`` set,
as on some shared machines, every run would compile the sandbox's ≈ 14,000 imported lines again
(≈ 0.1–0.2 s); ``--no-bytecode-cache`` measures that.

    python benchmarks/startup.py [--steps 300] [--repeats 5] [--against d0892ec] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
RUN = ["run", "--set", "task=bandit", "--set", "task_kwargs.K=10", "--set", "estimator=dg", "--set", "lr=0.1",
       "--set", "staleness.kind=fixed", "--set", "staleness.D=16", "--seeds", "8", "--no-store", "--quiet"]


#: where the runs' bytecode is cached (None: not cached, every run compiles what it imports)
PYCACHE: Path | None = None


def environment(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if PYCACHE is None:
        return {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, "PYTHONPYCACHEPREFIX": str(PYCACHE)}


def timed(argv: list[str], tree: Path, out: Path | None = None) -> dict:
    """One fresh process: its wall and CPU seconds, and the loop's training seconds (from ``out``)."""
    env = environment(tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    training = float(pd.read_parquet(out)["wall_time"].max()) if out is not None else 0.0
    return {"wall": wall, "cpu": cpu, "training": training}


def measure(commands: list[tuple[str, list[str], Path, Path | None]], repeats: int) -> list[dict]:
    """Each command ``repeats`` times, taken in turns (one of each, then again), so that a load that
    changes during the benchmark weighs on every row alike."""
    if PYCACHE is not None:
        for _, argv, tree, out in commands:
            timed(argv, tree, out)  # untimed: fills the bytecode cache
    runs = {name: [] for name, *_ in commands}
    for _ in range(repeats):
        for name, argv, tree, out in commands:
            runs[name].append(timed(argv, tree, out))
    rows = []
    for name, done in runs.items():
        med = {k: statistics.median(r[k] for r in done) for k in ("wall", "cpu", "training")}
        least = {k: min(r[k] for r in done) for k in ("wall", "cpu")}
        startup = [r["wall"] - r["training"] for r in done]
        rows.append({"command": name, "wall_s": med["wall"], "cpu_s": med["cpu"], "training_s": med["training"],
                     "startup_wall_s": statistics.median(startup), "min_wall_s": least["wall"],
                     "min_cpu_s": least["cpu"]})
    return rows


def sandbox_of(rev: str, folder: Path) -> Path:
    """The ``sandbox/`` package of commit ``rev``, unpacked under ``folder``."""
    archive = folder / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev, "sandbox"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "tree", filter="data")
    return folder / "tree"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300: ≈ 0.7 s on one core)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", default=None, metavar="REV", help="also time the sandbox of this commit")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile every imported module in every run (PYTHONDONTWRITEBYTECODE=1)")
    args = parser.parse_args()
    global PYCACHE
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        PYCACHE = None if args.no_bytecode_cache else Path(tmp) / "pycache"
        out = Path(tmp) / "run.parquet"
        run = [sys.executable, "-m", "sandbox.cli", *RUN, "--set", f"steps={args.steps}", "--out", str(out)]
        commands = [('python -c "import torch"', [sys.executable, "-c", "import torch"], ROOT, None)]
        trees = [("this tree", ROOT)]
        if args.against:
            trees.append((args.against, sandbox_of(args.against, Path(tmp))))
        for label, tree in trees:
            commands += [(f"{args.steps} steps, 8 seeds ({label})", run, tree, out),
                         (f"0 steps, 8 seeds ({label})", [*run, "--set", "steps=0"], tree, out),
                         (f"0 steps, 1 seed ({label})", [*run, "--set", "steps=0", "--seeds", "1"], tree, out)]
        rows = measure(commands, args.repeats)
    load.append(os.getloadavg()[0])
    table = pd.DataFrame(rows).set_index("command")
    print(f"sandbox run {' '.join(RUN[1:])} --set steps={args.steps}: {args.repeats} fresh processes each, in "
          f"turns, one thread; medians (min_*: the fastest); cpu = user + sys; startup_wall = wall − the loop's training; "
          f"bytecode {'compiled in every run' if args.no_bytecode_cache else 'cached'}; load average "
          f"{load[0]:.1f} before, {load[1]:.1f} after, on {os.cpu_count()} CPUs")
    print(table.to_string(float_format=lambda v: f"{v:.2f}"))
    torch_cpu, zero = rows[0]["cpu_s"], rows[2]
    print(f"\na 0-step run (start-up, one evaluation, the report): {zero['wall_s']:.2f} s wall, {zero['cpu_s']:.2f} "
          f"CPU-s, {zero['cpu_s'] - torch_cpu:.2f} CPU-s more than `import torch` alone ({torch_cpu:.2f}); target ≤ "
          f"{TARGET_S:g} s on an idle core, where wall ≈ CPU: {'PASS' if zero['cpu_s'] <= TARGET_S else 'FAIL'} "
          f"(on a busy machine CPU time inflates too: compare the margin over import torch)")
    if len(rows) > 4:
        for i, what in ((1, "300 steps, 8 seeds"), (2, "0 steps, 8 seeds"), (3, "0 steps, 1 seed")):
            then, now = rows[i + 3]["cpu_s"], rows[i]["cpu_s"]
            print(f"{what}: {then:.2f} CPU-s at {args.against} ({then - torch_cpu:.2f} over import torch), "
                  f"{now:.2f} now ({now - torch_cpu:.2f}): {now - then:+.2f} s")


if __name__ == "__main__":
    main()
