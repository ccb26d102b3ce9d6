"""The cost of ``sandbox score``: CPU seconds per method and per environment of a battery, from the
per-job CPU time (``time.process_time``) stored with every scored cell, and the wall time this
implies on 2 cores (two single-threaded workers: CPU / 2, no waiting). Targets (issue 15): one new
estimator on ``quick`` ≤ 5 minutes with the baselines cached, ≤ 20 minutes cold (all methods);
``standard`` ≤ 60 minutes. CPU time, not wall time, because the machine may be shared.

    sandbox score dg --battery quick          # fills the store (resumable)
    python benchmarks/scoring.py [--battery quick] [--results results]
"""

from __future__ import annotations

import argparse

import pandas as pd

from sandbox.scoring import load_battery
from sandbox.scoring.runner import code_version, default_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battery", default="quick")
    parser.add_argument("--results", default=None)
    args = parser.parse_args()
    battery, store = load_battery(args.battery), default_store(args.results)
    cells = {c.name for c in battery.cells}
    rows = []
    for job_id in store.job_ids():
        meta = store.metadata(job_id).get("params", {})
        if meta.get("battery") != battery.name or meta.get("version") != battery.version \
                or meta.get("code") != code_version() or meta["cell"]["name"] not in cells:
            continue
        frame = store.read(job_id)
        rows.append({"method": frame["method"].iloc[0], "env": frame["env"].iloc[0], "cpu_s": frame["cpu_s"].iloc[0]})
    if not rows:
        raise SystemExit(f"no stored results of {battery.name} v{battery.version} at code version {code_version()}; "
                         f"run `sandbox score dg --battery {battery.name}` first")
    table = pd.DataFrame(rows).pivot_table(index="method", columns="env", values="cpu_s", aggfunc="sum")
    counts = pd.DataFrame(rows).groupby("method").size()
    table["jobs"] = counts
    table["cpu_s"] = table.drop(columns="jobs").sum(axis=1)
    table["wall_2_cores_min"] = table["cpu_s"] / 2 / 60
    print(f"battery {battery.name} v{battery.version}, code {code_version()}, {len(cells)} cells")
    print(table.round(1).to_string())
    complete = table[table["jobs"] == len(cells)]
    if len(complete):
        one = complete["cpu_s"].max()
        print(f"\none new estimator (slowest complete method): {one:.0f} CPU-s → {one / 120:.1f} min on 2 cores "
              f"(target ≤ 5); all {len(complete)} complete methods cold: {complete['cpu_s'].sum() / 120:.1f} min "
              f"(target ≤ 20)")


if __name__ == "__main__":
    main()
