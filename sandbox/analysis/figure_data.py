"""A figure's per-seed results as one compact file: committed beside the paper figures, restored
into a results store so that every claim can be recomputed without rerunning a job.

``export`` writes the stored results of a figure's jobs into one zstd-compressed parquet file (the
frames concatenated, a ``job_id`` column saying whose row is whose); the schema metadata keeps, per
job, its columns and dtypes, the metadata its result was stored with and the code that made it
(zlib-compressed: the code stamps repeat from job to job, and parquet keeps the schema metadata
twice, uncompressed).
``restore`` writes each job back into a ``ResultsStore`` exactly as it was stored — the same
frame, metadata and code stamp — so a sweep finds it, and the store's own checksum guards it from
then on. A restored result made by other code is *stale* to the store; the caller decides whether
to keep it (``sandbox reproduce --fidelity paper`` does: the committed data are the evidence its
claims are computed from, and CLAIMS.md names the commit that made them).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, unique_jobs

log = logging.getLogger(__name__)

_KEY = b"sandbox_figure_data.zlib"  # base64 of the zlib-compressed JSON index
_PLAIN_KEY = b"sandbox_figure_data"  # the uncompressed index of files written before


def _index(metadata: dict[bytes, bytes] | None) -> dict:
    """The per-job index a data file's schema metadata holds."""
    metadata = metadata or {}
    if _KEY in metadata:
        return json.loads(zlib.decompress(base64.b64decode(metadata[_KEY])))
    return json.loads(metadata[_PLAIN_KEY])


def export(jobs: Sequence[Job], store: ResultsStore, path: str | os.PathLike) -> Path:
    """Write the stored results of ``jobs`` (all must be stored) to ``path`` as one parquet file."""
    jobs = unique_jobs(jobs)
    frames, index = [], {}
    for job in jobs:
        frame = store.read(job.id)
        index[job.id] = {"columns": list(frame.columns), "dtypes": {c: str(t) for c, t in frame.dtypes.items()},
                         "metadata": store.metadata(job.id), "code": store.code(job.id)}
        frames.append(frame.assign(**{"__job": job.id}))
    table = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
    packed = base64.b64encode(zlib.compress(json.dumps(index).encode(), 9))
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _KEY: packed})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=19)
    os.replace(tmp, path)
    return path


def jobs_in(path: str | os.PathLike) -> set[str]:
    """The ids of the jobs a data file holds."""
    return set(_index(pq.read_schema(path).metadata))


def restore(path: str | os.PathLike, store: ResultsStore, job_ids: Sequence[str] | None = None) -> list[str]:
    """Write the jobs of ``path`` (those of ``job_ids`` only, if given) that ``store`` does not hold
    as results of this code (missing, corrupt or stale) back into it, each as it was stored;
    returns the ids written."""
    table = pq.read_table(path)
    index = _index(table.schema.metadata)
    wanted = set(index) if job_ids is None else set(job_ids) & set(index)
    todo = [j for j in sorted(wanted) if store.state(j) != "ok"]
    if not todo:
        return []
    data = table.to_pandas()
    for job_id in todo:
        entry = index[job_id]
        frame = data[data["__job"] == job_id][entry["columns"]].reset_index(drop=True)
        frame = frame.astype({c: t for c, t in entry["dtypes"].items() if t != "object"})
        store.write(job_id, frame, entry["metadata"], code=entry["code"])
    return todo


__all__ = ["export", "jobs_in", "restore"]


def restore_figures(figures, all_jobs: dict, store: ResultsStore, data_dir: Path) -> set[str]:
    """Restore into ``store`` the committed per-seed data of ``figures`` (``data_dir/NAME.parquet``)
    that it lacks; return the ids of every job those files hold — the committed evidence, kept even
    where other code made it (CLAIMS.md names the commit that did)."""
    held: set[str] = set()
    for figure in figures:
        path = data_dir / f"{figure.name}.parquet"
        if not path.is_file():
            continue
        ids = [j.id for j in all_jobs[figure.name]]
        restored = restore(path, store, ids)
        if restored:
            log.warning("%s: %d result(s) restored from %s (no job reruns for them)", figure.name, len(restored), path)
        held |= jobs_in(path) & set(ids)
    return held
