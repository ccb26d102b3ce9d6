"""Carry committed per-seed data over to new fingerprints — by numbers, never by memory.

A code change that adds a logged metric (a new column) or moves code changes a component's
fingerprint (``sandbox.jobs.fingerprints``) without changing any number a stored result holds.
``restamp`` proves that for a committed data file (``paper_figures/data/NAME.parquet``) before it
re-stamps it: for every component whose fingerprint changed, the cheapest job that uses it is run
again, and its frame must equal the stored one on every stored column (timing columns aside;
columns the code now logs in addition are ignored). Only when every changed component of the file
is verified so do the jobs gain this code's fingerprints; a job that differs leaves the file as it
was and is named (``report["differs"]``).
"""

from __future__ import annotations

import os

import pandas as pd

from sandbox.analysis.figure_data import read_jobs, write
from sandbox.jobs.sweep import Job

#: columns that measure time, not numbers of the run
TIMING = ("wall_time",)


def same_numbers(stored: pd.DataFrame, again: pd.DataFrame) -> bool:
    """Whether ``again`` (a rerun) holds ``stored``'s numbers bit for bit on every stored column but
    the timing ones (extra columns in ``again`` are new diagnostics, not a change)."""
    columns = [c for c in stored.columns if c not in TIMING]
    if not set(columns) <= set(again.columns) or len(again) != len(stored):
        return False
    a, b = stored[columns].reset_index(drop=True), again[columns].reset_index(drop=True)
    return list(a.dtypes) == list(b.dtypes) and a.equals(b)


def restamp(path: str | os.PathLike, dry_run: bool = False) -> dict[str, list[str]]:
    """Verify and re-stamp ``path`` (module docstring). Returns the changed components, the jobs run
    again with identical numbers, those that differ, and the jobs re-stamped."""
    from sandbox.core.usage import recording
    from sandbox.jobs.fingerprints import changed, fingerprints

    entries = [(job_id, frame, entry) for job_id, frame, entry, _ in read_jobs(path)]
    report: dict[str, list[str]] = {"components": [], "identical": [], "differs": [], "restamped": []}
    stale = {job_id: set(changed(entry["code"]["fingerprints"])) for job_id, _, entry in entries
             if entry["code"].get("fingerprints")}
    needed = set().union(*stale.values()) if stale else set()
    report["components"] = sorted(needed)
    if not needed:
        return report
    cost = {job_id: float(entry["metadata"].get("seconds", 0) or 0) for job_id, _, entry in entries}
    chosen: list[str] = []
    for key in sorted(needed):  # the cheapest job using each changed component (one job may cover several)
        if not any(key in stale[j] for j in chosen):
            chosen.append(min((j for j in stale if key in stale[j]), key=lambda j: cost[j]))
    by_id = {job_id: (frame, entry) for job_id, frame, entry in entries}
    for job_id in chosen:
        frame, entry = by_id[job_id]
        meta = entry["metadata"]
        job = Job(meta["fn"], meta["params"], meta.get("label", ""), meta.get("threads", 1))
        with recording():  # the run records its components, as any job does
            again = job.run()
        ok = job.id == job_id and same_numbers(frame, again)
        report["identical" if ok else "differs"].append(job_id)
    if report["differs"] or dry_run:
        return report
    out = []
    for job_id, frame, entry in entries:
        code = entry["code"]
        if job_id in stale and stale[job_id]:
            code = {**code, "fingerprints": {**code["fingerprints"],
                                             **fingerprints(sorted(code["fingerprints"]))}}
            report["restamped"].append(job_id)
        out.append((job_id, frame, entry["metadata"], code))
    write(out, path)
    return report


__all__ = ["TIMING", "restamp", "same_numbers"]


def main(argv: list[str] | None = None) -> int:
    """``python -m sandbox.analysis.restamp FILE.parquet …``: verify and re-stamp each file, one line each."""
    import sys

    status = 0
    for path in (sys.argv[1:] if argv is None else argv):
        report = restamp(path)
        status |= bool(report["differs"])
        print(f"{path}: {len(report['components'])} changed component(s), {len(report['identical'])} rerun(s) "
              f"identical, {len(report['differs'])} differ {report['differs'] or ''}, "
              f"{len(report['restamped'])} job(s) re-stamped")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
