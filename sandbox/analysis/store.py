"""One tidy parquet file per job, named by the job's hash, written atomically.

A finished job is never recomputed: ``exists(job_id)`` is the test. Writes go to a temporary file
in the same folder and are renamed into place (``os.replace`` is atomic on POSIX), so an
interrupted sweep leaves either a complete file or none.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

DEFAULT_ROOT = Path(os.environ.get("SANDBOX_RESULTS", "results"))


class ResultsStore:
    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else DEFAULT_ROOT
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.parquet"

    def exists(self, job_id: str) -> bool:
        return self.path(job_id).is_file()

    def write(self, job_id: str, frame: pd.DataFrame, metadata: dict | None = None) -> Path:
        """Atomically write ``frame`` (with ``metadata`` as JSON in the parquet schema)."""
        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[b"sandbox"] = json.dumps(metadata or {}, sort_keys=True).encode()
        table = table.replace_schema_metadata(meta)
        target = self.path(job_id)
        fd, tmp = tempfile.mkstemp(prefix=f".{job_id}.", suffix=".tmp", dir=self.root)
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target

    def read(self, job_id: str) -> pd.DataFrame:
        if not self.exists(job_id):
            raise ValueError(f"no results for job {job_id} in {self.root}")
        return pd.read_parquet(self.path(job_id))

    def metadata(self, job_id: str) -> dict:
        meta = pq.read_schema(self.path(job_id)).metadata or {}
        return json.loads(meta.get(b"sandbox", b"{}"))

    def read_many(self, job_ids: Iterable[str]) -> pd.DataFrame:
        frames = [self.read(j) for j in job_ids]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def job_ids(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.parquet"))
