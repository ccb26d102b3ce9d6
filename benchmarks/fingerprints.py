"""What a numeric fingerprint costs (issue 36): milliseconds per component, per process.

Each registered estimator, baseline, controller, friction and task, each optimiser, delay
schedule and the runtime is fingerprinted once in this process (``sandbox.jobs.fingerprints``;
the first few imports are warmed up first); the table gives the mean and largest milliseconds per
kind, and what a typical training job's components take together.

    python benchmarks/fingerprints.py [--all]
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from sandbox.core.usage import component_key
from sandbox.jobs import fingerprints

TYPICAL = ["task:bandit", "estimator:dg", "advantage:group_mean", "optimizer:adam", "staleness:none", "runtime:loop"]


def keys() -> list[str]:
    registries = fingerprints._registries()
    out = [component_key(kind, name) for kind in ("estimator", "advantage", "controller", "friction", "task")
           for name in registries[kind].names()]
    return out + [f"optimizer:{n}" for n in ("adam", "sgd", "normalized")] + \
        [f"staleness:{k}" for k in ("none", "fixed", "uniform", "geometric", "per_actor")] + ["runtime:loop"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="print every component's time")
    args = parser.parse_args(argv)
    fingerprints.fingerprints(["task:bandit", "estimator:ppo"])  # imports and first calls
    fingerprints.reset()
    rows = []
    for key in keys():
        start = time.perf_counter()
        value = fingerprints.fingerprint(key)
        rows.append({"kind": key.split(":")[0], "key": key, "fingerprint": value,
                     "ms": 1e3 * (time.perf_counter() - start)})
    frame = pd.DataFrame(rows)
    if args.all:
        print(frame.to_string(index=False, float_format="%.1f"))
    print(frame.groupby("kind")["ms"].agg(["count", "mean", "max"]).round(1).to_string())
    fingerprints.reset()
    start = time.perf_counter()
    fingerprints.fingerprints(TYPICAL)
    print(f"a typical training job's components {TYPICAL}: {1e3 * (time.perf_counter() - start):.0f} ms, once per process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
