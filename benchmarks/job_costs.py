"""Write the table of measured job costs (``sandbox/runtime/job_costs.json``) from results folders.

Every stored result records its CPU seconds (``cpu_seconds``; the wall ``seconds`` before that was
stored); its *kind* (``sandbox.runtime.costs.kind``) is its function and parameters without the
method and the seed. The table keeps, per kind, the median CPU seconds, and per figure and fidelity
the seconds its notebook took (``results/notebooks/*.json``); an example job names each kind. Entries of the folders given replace
those of the same kind; the rest of the table is kept. Before a long command starts, it says how
long it will take from these numbers wherever no finished job of the same kind is stored.

    python benchmarks/job_costs.py results results/scores [--note "2 shared cores, 2026-11"]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from sandbox.analysis.store import ResultsStore, read_record
from sandbox.runtime.costs import TABLE, kind, measured_table, stored_costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="results folders (one parquet file per job)")
    parser.add_argument("--note", default="", help="where and how the costs were measured")
    args = parser.parse_args()
    table = measured_table()
    kinds, notebooks = dict(table.get("kinds", {})), dict(table.get("notebooks", {}))
    for folder in args.folders:
        store = ResultsStore(folder)
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
                                 "kinds": dict(sorted(kinds.items()))}, indent=1) + "\n")
    print(f"wrote {TABLE}: {len(kinds)} kinds, {len(notebooks)} notebooks")


if __name__ == "__main__":
    main()
