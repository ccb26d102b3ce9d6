"""The cost of ``sandbox check``: wall time of one check on the quick battery (its deployment
battery and ``quick``) with the built-ins cached, against the target of ≤ 5 minutes on 2 cores
(issue 25), measured in this run.

Two checks of the same configuration in one results folder: the first fills the cache with the
built-ins on both batteries (resumable; reused when already there); the second runs under a fresh
label, so the configuration's own jobs are computed again while every built-in is reused — the
situation of a user checking a new configuration. Wall time, on ``--workers`` processes (one torch
thread each); on a shared machine it includes waiting for the CPU, so the configuration's own CPU
seconds (stored with every job) are printed too.

    python benchmarks/check.py [--config tests/check/fixtures/verl_dapo_async.yaml] [--precision bf16]
                               [--workers 2] [--results results]
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

import pandas as pd

from sandbox.check import check

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "check" / "fixtures" / "verl_dapo_async.yaml"
TARGET_MIN = 5.0


def _timed(label: str, **kwargs) -> dict:
    start = time.perf_counter()
    report = check(label=label, **kwargs)
    wall = time.perf_counter() - start
    jobs = [report.deployment.attrs["jobs"], report.standard.attrs["jobs"]]
    own = pd.concat([f[f["method"] == report.mapping.label] for f in (report.deployment, report.standard)])
    cpu = float(own.groupby(["env", "cell"])["cpu_s"].first().sum())  # per job, stored with its rows
    return {"jobs": sum(j["total"] for j in jobs), "computed": sum(j["computed"] for j in jobs),
            "reused": sum(j["reused"] for j in jobs), "deployment cells": len(report.deployment["cell"].unique()),
            "config cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "wall_min": round(wall / 60, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(FIXTURE))
    parser.add_argument("--precision", default="bf16", help="'bf16' (default: the most cells) or 'none'")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default=None)
    args = parser.parse_args()
    common = {"config": args.config, "battery": "quick", "workers": args.workers, "results": args.results,
              "precision": None if args.precision == "none" else args.precision, "progress": False}
    fill = _timed("bench-fill", **common)  # the built-ins (and this label's jobs), cached or computed
    new = _timed(f"bench-{uuid.uuid4().hex[:8]}", **common)  # a new configuration label: its jobs only
    table = pd.DataFrame([{"run": "fill the cache (built-ins)", **fill},
                          {"run": "check, built-ins cached", **new}]).set_index("run")
    print(f"sandbox check {Path(args.config).name} --battery quick"
          + (f" --precision {args.precision}" if args.precision != "none" else "") + f", {args.workers} workers")
    print(table.to_string())
    verdict = "PASS" if new["wall_min"] <= TARGET_MIN else "FAIL"
    print(f"\ncheck with cached built-ins: {new['wall_min']:.2f} min (target ≤ {TARGET_MIN:g} min on 2 cores): {verdict}; "
          f"the configuration's own jobs took {new['config cpu_s']:.0f} CPU-s, {new['config cpu_s'] / 120:.1f} min "
          "on 2 idle cores")


if __name__ == "__main__":
    main()
