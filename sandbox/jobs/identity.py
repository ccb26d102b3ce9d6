"""A stored result's identity: which job it is the result of, checked against the job it is read for.

A result file is found by its name (the job id), and its checksum only says that the file is whole:
another job's valid file copied or linked over it, or committed data that hold another job's rows,
verify. So every result carries, inside its checksummed payload, ``{"job": id, "config": hash}``:
the job it was written for and the hash of the definition its metadata holds (``fn``, ``params``,
``threads``: the very hash that makes a job's id, ``sandbox.jobs.sweep.Job.id``; for a training job,
its run config's hash). ``mismatch`` names what disagrees — the stamp, the definition or the rows'
``job_id`` column against the id the result is read for — and the store calls such a result corrupt,
so that it is recomputed. A result written before identities (issue 46) is checked by its metadata
and rows alone; one whose metadata holds no job definition (a direct ``ResultsStore.write``) by its
stamp alone.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd


def job_hash(fn: str, params: dict, threads: int = 1) -> str:
    """A job's id (``sandbox.jobs.sweep.Job.id``): sha256 of its function and canonical parameters
    (and its thread count when not 1: one thread hashes as before threads were part of a job)."""
    from sandbox.runtime.config import _freeze  # (here: the store, which imports this, stays light)

    payload = {"fn": fn, "params": _freeze(params)}
    if threads != 1:
        payload["threads"] = threads
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def definition_hash(metadata: dict) -> str | None:
    """The job id the definition in ``metadata`` hashes to (None when it holds none)."""
    fn = metadata.get("fn") if isinstance(metadata, dict) else None
    if not (isinstance(fn, str) and ":" in fn and isinstance(metadata.get("params"), dict)):  # a job's 'module:function'
        return None
    threads = metadata.get("threads", 1)
    try:
        return job_hash(metadata["fn"], metadata["params"], threads if isinstance(threads, int) else 1)
    except (TypeError, ValueError):  # parameters JSON cannot hold: no definition
        return None


def identity(job_id: str, metadata: dict) -> dict:
    """What a result written for ``job_id`` with ``metadata`` carries."""
    return {"job": job_id, "config": definition_hash(metadata)}


def _what(metadata: dict) -> str:
    if not isinstance(metadata, dict) or "fn" not in metadata:
        return ""
    label = f", {metadata['label']!r}" if metadata.get("label") else ""
    return f" ({metadata['fn'].rpartition(':')[2]}{label})"


def mismatch(job_id: str, stamp: dict | None, metadata: dict, rows: pd.Series | None = None) -> str:
    """Why a result read for ``job_id`` is another job's ('' if it is its own): its identity
    ``stamp`` (None before issue 46), the job its ``metadata`` define, the ``job_id`` column of its rows."""
    others = []
    if stamp is not None and stamp.get("job") != job_id:
        others.append(f"it was written for job {stamp.get('job')}")
    config = definition_hash(metadata)
    if config is not None and config != job_id:
        others.append(f"its metadata define job {config}{_what(metadata)}")
    if stamp is not None and stamp.get("config") != config:
        others.append(f"its identity's config hash {stamp.get('config')} is not its metadata's {config}")
    if rows is not None and len(rows):
        foreign = sorted({str(v) for v in rows.unique()} - {job_id})
        if foreign:
            others.append(f"its rows are job {', '.join(foreign)}'s")
    return f"another job's result in the place of job {job_id}: {'; '.join(others)}" if others else ""


__all__ = ["definition_hash", "identity", "job_hash", "mismatch"]
