"""Write the table of measured job costs (``sandbox/jobs/job_costs.json``) from results folders.

Every stored result records its CPU seconds (``cpu_seconds``; the wall ``seconds`` before that was
stored); its *kind* (``sandbox.jobs.costs.kind``) is its function and parameters without the
method and the seed. The table keeps, per kind, the median CPU seconds, and per figure and fidelity
the seconds its notebook took (``results/notebooks/*.json``); an example job names each kind. With
``--claims-md``, each figure's average job at that file's fidelity (its job compute over its jobs),
for the jobs of kinds never measured. Entries of the folders given replace
those of the same kind; the rest of the table is kept. Before a long command starts, it says how
long it will take from these numbers wherever no finished job of the same kind is stored.

    python benchmarks/job_costs.py results results/scores [--note "2 shared cores, 2026-11"]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from sandbox.jobs.costs import TABLE, kind, measured_table, stored_costs
from sandbox.jobs.store import ResultsStore, read_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="results folders (one parquet file per job)")
    parser.add_argument("--note", default="", help="where and how the costs were measured")
    parser.add_argument("--claims-md", default=None, help="a CLAIMS.md (e.g. paper_figures/CLAIMS.md): each "
                                                           "figure's average job and notebook time at its fidelity")
    parser.add_argument("--ray-fns", default="", help="comma-separated job functions that ran on Ray, for results "
                                                      "stored before the 'ray' flag was (their wall time counts)")
    args = parser.parse_args()
    table = measured_table()
    kinds, notebooks = dict(table.get("kinds", {})), dict(table.get("notebooks", {}))
    figures = dict(table.get("figures", {}))
    if args.claims_md:
        text = Path(args.claims_md).read_text()
        fidelity = re.search(r"^# Claims at (\w+) fidelity", text, re.M)[1]
        for name, jobs, amount, unit, notebook in re.findall(
                r"^\| `([\w-]+)` \| [^|]* \| (\d+) \| ([\d.]+) (min|h) \| (\d+) s \|", text, re.M):
            seconds = float(amount) * (60 if unit == "min" else 3600)
            figures[f"{name}.{fidelity}"] = {"job_s": round(seconds / int(jobs), 2), "jobs": int(jobs)}
            notebooks[f"{name}.{fidelity}"] = float(notebook)
        print(f"{args.claims_md}: {len(figures)} figures at {fidelity} fidelity")
    for folder in args.folders:
        store = ResultsStore(Path(folder))
        if args.ray_fns:
            store = _RayFlagged(store, set(args.ray_fns.split(",")))
        found = stored_costs(store, store.job_ids())
        examples = {}
        for job_id in store.job_ids():
            meta = store.metadata(job_id)
            examples.setdefault(kind(meta.get("fn", ""), meta.get("params", {})), f"{meta.get('fn')} {meta.get('label')}")
        kinds.update({k: {"cpu_s": round(statistics.median(v), 2), "jobs": len(v), "example": examples[k]}
                      for k, v in found.items()})
        for record in sorted(Path(folder).glob("notebooks/*.json")):
            data, state, _ = read_record(record)
            if state in ("ok", "stale") and isinstance(data, dict) and "notebook_seconds" in data:
                notebooks[record.stem] = data["notebook_seconds"]
        print(f"{folder}: {sum(map(len, found.values()))} results of {len(found)} kinds")
    notes = [n for n in [*table.get("notes", []), args.note] if n]
    TABLE.write_text(json.dumps({"notes": list(dict.fromkeys(notes)), "notebooks": dict(sorted(notebooks.items())),
                                 "figures": dict(sorted(figures.items())), "kinds": dict(sorted(kinds.items()))},
                                indent=1) + "\n")
    print(f"wrote {TABLE}: {len(kinds)} kinds, {len(notebooks)} notebooks")


class _RayFlagged:
    """A store whose results of the given functions read as run on Ray (flagged 'ray')."""

    def __init__(self, store: ResultsStore, fns: set[str]) -> None:
        self.store, self.fns = store, fns

    def job_ids(self) -> list[str]:
        return self.store.job_ids()

    def metadata(self, job_id: str) -> dict:
        meta = self.store.metadata(job_id)
        return {**meta, "ray": True} if meta.get("fn") in self.fns else meta


if __name__ == "__main__":
    main()
