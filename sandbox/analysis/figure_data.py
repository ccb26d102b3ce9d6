"""A figure's per-seed results as one compact file: committed beside the paper figures, restored
into a results store so that every claim can be recomputed without rerunning a job.

``export`` writes the stored results of a figure's jobs into one zstd-compressed parquet file, a
few jobs per row group (``GROUP_SECONDS`` of compute at most; a ``__job`` column says whose rows
they are), with parquet's page checksums;
the schema metadata keeps, per job, its columns and dtypes, the metadata its result was stored
with, the code that made it (fingerprints included) and its checksum — the store's own
(``sandbox.jobs.store.frame_digest``) — zlib-compressed (the code stamps repeat from job to job,
and parquet keeps the schema metadata twice, uncompressed).

A figure may keep less of each job's result (``DataSpec``: the columns its notebook reads, some in single
precision); the file then holds that, its checksum is that frame's, and a rerun's export keeps the
same.

``restore`` writes each job back into a ``ResultsStore`` exactly as it was exported — the same frame,
metadata and code stamp — after checking it against its checksum: a job whose row group cannot be
read (a failed decompression, a page checksum: every job of that group) or whose values differ from
what was exported (a flipped byte that decodes silently) is *damaged*: named in one warning (file
and job), left out, and so recomputed by the sweep, never restored and never re-exported. A file whose index cannot be
read is named, and none of its jobs restored. Files written before per-job checksums (one row
group for all jobs) restore as before, unverified. A restored result made by other code is
*stale* to the store; the caller decides whether to keep it (``sandbox reproduce --fidelity
paper`` does: the committed data are the evidence its claims are computed from, and CLAIMS.md names
the commit that made them).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sandbox.jobs.store import ResultsStore, frame_digest, stamp
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


@dataclass(frozen=True)
class DataSpec:
    """What a figure's data file keeps of each job's result (``export``): ``columns``, those its notebook
    and the loading read (ids, step, seed, divergence, budget: ``simulations.results``) — every column
    when empty — and of them ``float32``, measurements stored in single precision (relative rounding
    ≤ 6e-8, far below the 4 significant digits a claim prints: declared only where the figure's claim
    rows come out the same) — or instead ``drop``, the columns none of them reads (a figure whose jobs
    log many signals and read most). A restored result holds the rest alone: a figure that comes to
    read another column runs its jobs again (``sandbox reproduce NAME --recompute``)."""

    columns: tuple[str, ...] = ()
    float32: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.columns and self.drop:
            raise ValueError("give columns (those kept) or drop (those left out), not both")
        stray = [c for c in self.float32 if (self.columns and c not in self.columns) or c in self.drop]
        if stray:
            why = "dropped" if any(c in self.drop for c in stray) else "not in columns"
            raise ValueError(f"float32 must name kept columns, got {stray}: {why}")

    @classmethod
    def of(cls, spec) -> DataSpec | None:
        """``spec`` as a ``DataSpec``: None, a ``DataSpec``, or a mapping of its fields (how a figure's
        registration declares it: job code must not import this presentation module)."""
        return spec if spec is None or isinstance(spec, cls) else cls(**{k: tuple(v) for k, v in spec.items()})

    def apply(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with the kept columns alone, in its order, the ``float32`` ones in single precision."""
        frame = frame[[c for c in frame.columns if c in self.columns]] if self.columns else frame
        frame = frame.drop(columns=[c for c in self.drop if c in frame.columns])
        wrong = [c for c in self.float32 if c in frame.columns and not pd.api.types.is_float_dtype(frame[c])]
        if wrong:
            raise ValueError(f"float32 must name floating-point columns, got {wrong} ({frame[wrong].dtypes.to_dict()})")
        return frame.astype({c: "float32" for c in self.float32 if c in frame.columns})


def job_checksum(frame: pd.DataFrame, metadata: dict, code: dict) -> str:
    """The checksum of one job's result: the store's (``frame_digest``), so a restored result
    carries the checksum it had when it was exported."""
    return frame_digest(frame, stamp(metadata), stamp(code))


#: a row group holds consecutive jobs up to this much compute (seconds, as their results record)
#: and this many jobs: what one damaged row group costs to recompute, against the size of a file
#: with a row group per job (parquet's per-chunk overhead made the committed data 2.7 times larger)
GROUP_SECONDS, GROUP_JOBS = 600.0, 16


def _row_groups(entries: Sequence[tuple[str, pd.DataFrame, dict, dict]]) -> list[int]:
    """The row group of each entry: consecutive jobs, each group within ``GROUP_SECONDS`` of compute
    and ``GROUP_JOBS`` jobs (a job alone where it takes longer)."""
    groups, group, seconds, count = [], 0, 0.0, 0
    for _, _frame, metadata, _ in entries:
        cost = float(metadata.get("seconds", 0.0) or 0.0)
        if count and (count >= GROUP_JOBS or seconds + cost > GROUP_SECONDS):
            group, seconds, count = group + 1, 0.0, 0
        groups.append(group)
        seconds, count = seconds + cost, count + 1
    return groups


def write(entries: Sequence[tuple[str, pd.DataFrame, dict, dict]], path: str | os.PathLike) -> Path:
    """Write ``(job id, frame, metadata, code)`` entries to ``path``: the frames concatenated (one
    schema) in row groups of a few jobs (``_row_groups``), with page checksums; the index, with each
    job's checksum and row group, in the schema metadata; atomically (a temporary file renamed)."""
    index, frames, sizes = {}, [], {}
    for (job_id, frame, metadata, code), group in zip(entries, _row_groups(entries)):
        index[job_id] = {"columns": list(frame.columns), "dtypes": {c: str(t) for c, t in frame.dtypes.items()},
                         "metadata": metadata, "code": code, "row_group": group,
                         "checksum": job_checksum(frame, metadata, code)}
        sizes[group] = sizes.get(group, 0) + len(frame)
        frames.append(frame.assign(**{"__job": job_id}))
    numbered = {g: i for i, g in enumerate(g for g in sorted(sizes) if sizes[g])}  # groups without rows: none
    for entry in index.values():
        entry["row_group"] = numbered.get(entry["row_group"])
    table = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
    packed = base64.b64encode(zlib.compress(json.dumps(index).encode(), 9))
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _KEY: packed})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # measurements (floats) compress best either with their bytes split by significance and no
    # dictionary (−30% on most of the paper tier's data) or as parquet's default does: the smaller is kept
    floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
    split = {"use_dictionary": [n for n in table.column_names if n not in floats], "use_byte_stream_split": floats}
    written = [_write_groups(table, sizes, path.with_name(f".{path.name}.{i}.tmp"), options)
               for i, options in enumerate(({}, split) if floats else ({},))]
    best = min(written, key=lambda p: p.stat().st_size)
    for tmp in written:
        if tmp != best:
            tmp.unlink()
    os.replace(best, path)
    return path


def _write_groups(table: pa.Table, sizes: dict[int, int], tmp: Path, options: dict) -> Path:
    """``table`` in one row group per entry of ``sizes`` (rows), zstd 19, page checksums."""
    with pq.ParquetWriter(tmp, table.schema, compression="zstd", compression_level=19, write_statistics=False,
                          write_page_checksum=True, **options) as out:
        start = 0
        for group in sorted(sizes):
            if sizes[group]:
                out.write_table(table.slice(start, sizes[group]), row_group_size=sizes[group])
            start += sizes[group]
    return tmp


def export(jobs: Sequence[Job], store: ResultsStore, path: str | os.PathLike, spec: DataSpec | None = None) -> Path:
    """Write the stored results of ``jobs`` (all must be stored) to ``path`` as one parquet file, of
    each what ``spec`` keeps (every column, as stored, by default)."""
    spec = spec or DataSpec()
    frames = [(job.id, store.read(job.id)) for job in unique_jobs(jobs)]
    held = {c for _, frame in frames for c in frame.columns}
    absent = [c for c in spec.columns if c not in held]  # a dropped column may be absent: restored from a file
    if frames and absent:
        raise ValueError(f"spec.columns names columns that no job of {Path(path).name} holds: {absent}")
    entries = [(job_id, spec.apply(frame), store.metadata(job_id), store.code(job_id)) for job_id, frame in frames]
    return write(entries, path)


def jobs_in(path: str | os.PathLike) -> set[str]:
    """The ids of the jobs a data file holds."""
    return set(_index(pq.read_schema(path).metadata))


def job_seconds_in(path: str | os.PathLike) -> dict[str, float]:
    """Job id → the compute seconds its stored result records, for the jobs of a data file."""
    return {job: float(entry["metadata"].get("seconds", 0.0)) for job, entry in _index(pq.read_schema(path).metadata).items()}


@dataclass
class Restored:
    """What ``restore_jobs`` did: the jobs written into the store, and the damaged ones (id → why)."""

    written: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)
    unreadable: str = ""  # why the whole file could not be read ('' if it could)


def _open(path: str | os.PathLike) -> tuple[pq.ParquetFile, dict]:
    """The file and its index; ``ValueError`` naming the file when either cannot be read."""
    try:
        parquet = pq.ParquetFile(path, page_checksum_verification=True)
        return parquet, _index(parquet.schema_arrow.metadata)
    except Exception as err:  # noqa: BLE001 — any damage of the footer or the index
        raise ValueError(f"{path}: its index cannot be read ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}); git checkout the file to restore it") from None


def read_jobs(path: str | os.PathLike, job_ids: Sequence[str] | None = None):
    """Yield ``(job id, frame, entry, why)`` for the jobs of ``path`` (those of ``job_ids`` only,
    if given): the frame as exported and its index entry, or ``why`` it is damaged (frame None).
    Raises ``ValueError`` naming the file when its index cannot be read."""
    parquet, index = _open(path)
    wanted = sorted(index) if job_ids is None else sorted(set(job_ids) & set(index))
    groups: dict = {}  # row group (None: a file of one, written before row groups of a few jobs) → its rows

    def rows(group):
        if group not in groups:
            groups.clear()  # one group in memory at a time (jobs are sorted: a group's jobs are read together)
            groups[group] = (parquet.read() if group is None else parquet.read_row_group(group)).to_pandas()
        return groups[group]

    for job_id in sorted(wanted, key=lambda j: (index[j].get("row_group") or 0, j)):
        entry = index[job_id]
        try:
            if "row_group" in entry and entry["row_group"] is None:  # a job without rows
                data = parquet.schema_arrow.empty_table().to_pandas()
            else:
                data = rows(entry.get("row_group"))
            frame = data[data["__job"] == job_id][entry["columns"]].reset_index(drop=True)
            frame = frame.astype({c: t for c, t in entry["dtypes"].items() if t != "object"})
        except Exception as err:  # noqa: BLE001 — a failed decompression, a page checksum, a wrong type …
            yield job_id, None, entry, f"unreadable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            continue
        if "checksum" in entry and job_checksum(frame, entry["metadata"], entry["code"]) != entry["checksum"]:
            yield job_id, None, entry, "its values differ from those exported (checksum mismatch)"
            continue
        yield job_id, frame, entry, ""


def restore_jobs(path: str | os.PathLike, store: ResultsStore, job_ids: Sequence[str] | None = None) -> Restored:
    """Write the jobs of ``path`` (those of ``job_ids`` only, if given) that ``store`` does not hold
    as results of this code (missing, corrupt or stale) back into it, each as it was stored, after
    verifying it; a damaged job is named in one warning and left out (the sweep recomputes it)."""
    report = Restored()
    try:
        held = set(_open(path)[1])
        wanted = held if job_ids is None else set(job_ids) & held
        todo = [j for j in sorted(wanted) if store.state(j) != "ok"]
        for job_id, frame, entry, why in (read_jobs(path, todo) if todo else ()):
            if frame is None:
                report.damaged[job_id] = why
                log.warning("%s: job %s is damaged: %s; not restored, so it is recomputed (git checkout the file "
                            "to restore it)", path, job_id, why)
                continue
            store.write(job_id, frame, entry["metadata"], code=entry["code"])
            report.written.append(job_id)
    except ValueError as err:
        report.unreadable = str(err)
        log.warning("%s; none of its jobs restored", err)
    return report


def restore(path: str | os.PathLike, store: ResultsStore, job_ids: Sequence[str] | None = None) -> list[str]:
    """``restore_jobs``: the ids written."""
    return restore_jobs(path, store, job_ids).written


def restore_figures(figures, all_jobs: dict, store: ResultsStore, data_dir: Path) -> set[str]:
    """Restore into ``store`` the committed per-seed data of ``figures`` (``data_dir/NAME.parquet``)
    that it lacks; return the ids of every intact job those files hold — the committed evidence,
    kept even where other code made it (CLAIMS.md names the commit that did). A damaged job is not
    among them: it is recomputed."""
    held: set[str] = set()
    for figure in figures:
        path = data_dir / f"{figure.name}.parquet"
        if not path.is_file():
            continue
        ids = [j.id for j in all_jobs[figure.name]]
        report = restore_jobs(path, store, ids)
        if report.written:
            log.warning("%s: %d result(s) restored from %s (no job reruns for them)", figure.name,
                        len(report.written), path)
        if report.unreadable:
            continue
        held |= (jobs_in(path) & set(ids)) - set(report.damaged)
    return held


def convert(path: str | os.PathLike, rerun: bool = True) -> dict[str, list[str]]:
    """Rewrite a data file in the current format — row groups of a few jobs, each job with its checksum —
    keeping every job's frame, metadata and code stamp; a stamp written before fingerprints, under
    which this checkout's rule of the time (same version and ``NUMERICS``) accepted the result as
    its own, gains the fingerprints of the components its run configs build (a job whose
    parameters hold none is run again, once, and stamped only if it gives the very same frame).
    Returns which jobs were stamped, run again (identical) or left without fingerprints."""
    from sandbox.core.numerics import NUMERICS
    from sandbox.core.usage import recording
    from sandbox.jobs.fingerprints import fingerprints, static_components
    from sandbox.jobs.store import code_version

    report: dict[str, list[str]] = {"stamped": [], "rerun identical": [], "left": []}
    entries = []
    for job_id, frame, entry, why in read_jobs(path):
        if frame is None:
            raise ValueError(f"{path}: job {job_id} is damaged ({why}): not converted")
        code, meta = entry["code"], entry["metadata"]
        if "fingerprints" not in code and code.get("version") == code_version()["version"] \
                and code.get("numerics") == NUMERICS:
            used = static_components(meta.get("params", {}))
            if used is None and rerun:
                job = Job(meta["fn"], meta["params"], meta.get("label", ""), meta.get("threads", 1))
                with recording() as recorded:
                    again = job.run()
                same_columns = sorted(again.columns) == sorted(frame.columns)  # (their order is not a number)
                if job.id == job_id and same_columns and again[list(frame.columns)].equals(frame) \
                        and list(again[list(frame.columns)].dtypes) == list(frame.dtypes):
                    used = recorded
                    report["rerun identical"].append(job_id)
            if used is not None:
                code = {**code, "fingerprints": fingerprints(used)}
                report["stamped"].append(job_id)
        if "fingerprints" not in code:
            report["left"].append(job_id)
        entries.append((job_id, frame, meta, code))
    write(entries, path)
    return report


__all__ = ["DataSpec", "Restored", "convert", "export", "job_checksum", "job_seconds_in", "jobs_in", "read_jobs", "restore",
           "restore_figures", "restore_jobs", "write"]
