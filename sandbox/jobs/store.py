"""One tidy parquet file per job, named by the job's hash, written atomically and verifiable.

Every result carries, in its parquet schema, the caller's metadata, the code that made it (package
version and a hash of the ``sandbox/`` sources), its identity (the job it is the result of:
``sandbox.jobs.identity``) and a checksum over all of that and the data. ``state(job_id)`` is
'missing', 'corrupt' (unreadable, checksum mismatch, or another job's result), 'stale' (other code,
or written before results carried provenance) or 'ok'. Writes go to a temporary file (named by
host and pid, mode 0644 under the umask), are fsynced and renamed into place (``os.replace`` is
atomic on POSIX): a killed writer leaves a complete file or a temporary one, which
``clean_temp`` removes once its writer is dead. ``claim`` takes a job's lock file
(``sandbox.jobs.locks``: a dead owner's lock is taken over).

The small JSON files derived from results (a figure's claims, its notebook's execution record)
are kept the same way by ``write_record`` / ``read_record``: written atomically with the code that
made them and a checksum, and read back as 'missing', 'corrupt', 'stale' or 'ok'.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sandbox.core.numerics import NUMERICS
from sandbox.core.processes import HOST, process_alive
from sandbox.jobs.fingerprints import (
    changed,
    fingerprints,
    path_fingerprints,
    platform,
    portable_fingerprints,
)
from sandbox.jobs.identity import identity, mismatch
from sandbox.jobs.locks import JobLocks

log = logging.getLogger(__name__)

#: ``$SANDBOX_RESULTS``, or ``results``; set but empty it counts as unset (it meant the current folder: issue 46, R6)
DEFAULT_ROOT = Path(os.environ.get("SANDBOX_RESULTS") or "results")
_USER, _CODE, _SUM, _ID = b"sandbox", b"sandbox_code", b"sandbox_checksum", b"sandbox_identity"


#: modules that only present stored results (command line, claims, statistics, plots, CLAIMS.md, the
#: scorecard's front end and report, ``sandbox check``, which only chooses the cells and recipes a
#: job's parameters hold): no training job imports them (tests/reliability/test_store.py runs every
#: kind of job and checks), so editing them leaves the numbers, and stored results, valid
PRESENTATION = ("cli.py", "cli_args.py", "cli_run.py", "cli_score.py", "cli_check.py", "reproduce.py",
                "reproduce_costs.py", "claims_file.py", "analysis/claim_table.py",
                "analysis/claims.py", "analysis/plotting.py", "analysis/stats.py", "analysis/provenance.py",
                "analysis/exact_tests.py", "analysis/figure_data.py",
                "scoring/__init__.py", "scoring/api.py", "scoring/statistics.py", "scoring/report.py",
                "scoring/batteries/versions.py", "check/__init__.py", "check/api.py", "check/deployment.py",
                "check/mapping.py", "check/readers.py", "check/trl.py", "check/verdict.py", "check/verl.py")


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, str]:
    """The code this process runs: ``sandbox.__version__`` and sha256 over the package's ``.py``
    files but ``PRESENTATION`` (relative path + bytes, in sorted order). Computed once per process
    (~100 files, ms)."""
    package = _package()
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() in PRESENTATION:
            continue
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"version": sys.modules["sandbox"].__version__, "source": digest.hexdigest()[:16]}


def _package() -> Path:
    return Path(sys.modules["sandbox"].__file__).resolve().parent  # imported: this module is in it


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else ""


def job_code(components: Iterable[str] | None = None) -> dict:
    """``code_version()``, ``NUMERICS``, the hash of every ``sandbox`` module this process has
    imported (``PRESENTATION`` left out) and, given the ``components`` a job used
    (``sandbox.core.usage``), their numeric fingerprints (``sandbox.jobs.fingerprints``): a stored
    result stays valid while those match, whatever code was moved or edited."""
    package = _package()
    modules = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or name.partition(".")[0] != "sandbox":  # resolving every module's path took 0.5 s
            continue
        path = Path(file).resolve()
        if path.suffix == ".py" and path.is_relative_to(package):
            rel = path.relative_to(package).as_posix()
            if rel not in PRESENTATION:
                modules[rel] = _file_hash(path)
    code = {**code_version(), "numerics": NUMERICS, "modules": dict(sorted(modules.items()))}
    if components is not None:
        components = list(components)
        code["fingerprints"] = fingerprints(components)
        code["portable"] = portable_fingerprints(components)  # checked instead on another platform
        code["platform"] = platform()
        code["paths"] = path_fingerprints(components)  # the code paths its numeric settings select
    return code


def code_verdict(code: dict) -> tuple[str, dict[str, tuple[str, str]]]:
    """Why a result's recorded ``code`` does not give this checkout's numbers ('' if it does), and
    the components whose numbers changed ({key: (stored fingerprint, now)}).

    With fingerprints (every result since issue 36): the same ``NUMERICS`` and the same fingerprint
    of every component the job used — the package version and the bytes of the code do not matter.
    Without (older results): the same package version and either the same whole-package hash or
    the same bytes in every module the job had imported."""
    if "fingerprints" in code:
        if code.get("numerics") != NUMERICS:
            return f"NUMERICS was bumped ({code.get('numerics')} → {NUMERICS})", {}
        moved = changed(code["fingerprints"], code.get("portable"), code.get("platform"), code.get("paths"))
        return ("the numbers of " + ", ".join(moved) + " changed" if moved else ""), moved
    current = code_version()
    if code.get("version") == current["version"]:
        if code.get("source") == current["source"]:
            return "", {}
        modules = code.get("modules")
        package = _package()
        if modules and all(_file_hash(package / rel) == h for rel, h in modules.items()):
            return "", {}
    return (f"made by other code before results carried fingerprints ({code.get('version')}, "
            f"{code.get('source')})" if code else "written before results carried provenance"), {}


def same_code(code: dict) -> bool:
    return not code_verdict(code)[0]  # the result's recorded ``code`` gives this checkout's numbers


def _digest(table: pa.Table) -> str:
    """sha256 over the schema's sandbox metadata, the column names and types, and every value."""
    meta = table.schema.metadata or {}
    return frame_digest(table.to_pandas(), meta.get(_USER, b""), meta.get(_CODE, b""), meta.get(_ID, b""))


def frame_digest(frame: pd.DataFrame, metadata: bytes, code: bytes, identity: bytes = b"") -> str:
    """The checksum a result carries: sha256 over its metadata, code and identity (JSON bytes, as
    stored; no identity in results written before issue 46), the column names and dtypes, and every
    value (``pd.util.hash_pandas_object``)."""
    digest = hashlib.sha256(metadata + b"\0" + code + b"\0" + (identity + b"\0" if identity else b""))
    digest.update(str([(name, str(dtype)) for name, dtype in frame.dtypes.items()]).encode())
    try:
        values = pd.util.hash_pandas_object(frame, index=False)
    except TypeError:  # unhashable cells (lists, dicts): hash their text
        values = pd.util.hash_pandas_object(frame.astype(str), index=False)
    digest.update(values.to_numpy().tobytes())
    return digest.hexdigest()


def stamp(value: dict) -> bytes:
    """A result's metadata or code as its schema stores them (and its checksum covers them)."""
    return json.dumps(value, sort_keys=True).encode()


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write ``path`` through ``write(file)``: into a temporary file beside it (named by host and
    pid, mode 0644 under the umask), fsynced, renamed into place, the folder fsynced."""
    tmp = path.parent / f".{path.stem}~{HOST}~{os.getpid()}~{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    try:  # so that the rename survives a power cut (POSIX; a no-op elsewhere)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def _record_sum(data, code: dict) -> str:
    return hashlib.sha256(json.dumps({"data": data, "code": code}, sort_keys=True).encode()).hexdigest()


def write_record(path: str | os.PathLike, data, code: dict | None = None) -> Path:
    """Atomically write ``data`` (JSON) as ``{"data", "code", "checksum"}``: ``code`` (default: this
    process's ``job_code(())``: no component, so valid while ``NUMERICS`` stands) and a sha256 over
    both, as a job result carries them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    code = code or job_code(())  # a record uses no component: valid while NUMERICS stands
    text = json.dumps({"data": data, "code": code, "checksum": _record_sum(data, code)}, indent=1)
    return atomic_write(path, lambda f: f.write(text.encode()))


def read_record(path: str | os.PathLike) -> tuple[object, str, str]:
    """A ``write_record`` file's data, its state and why: 'missing'; 'corrupt' (unreadable, or its
    checksum does not match: truncated or edited; data None); 'stale' (made by other code, or
    written before records carried a checksum: the data as found) or 'ok'."""
    path = Path(path)
    if not path.is_file():
        return None, "missing", "no such file"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return None, "corrupt", f"unreadable: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    if not (isinstance(saved, dict) and {"data", "code", "checksum"} <= set(saved)):
        return saved, "stale", "written before records carried a checksum"
    if saved["checksum"] != _record_sum(saved["data"], saved["code"]):
        return None, "corrupt", "checksum mismatch: truncated or edited"
    if not same_code(saved["code"]):
        return saved["data"], "stale", f"made by other code ({saved['code'].get('version')}, {saved['code'].get('source')})"
    return saved["data"], "ok", ""


@dataclass(frozen=True)
class Verdict:
    """A result's state ('missing', 'corrupt', 'stale', 'ok'), why, and the components whose numbers changed."""

    state: str
    why: str = ""
    changed: dict = field(default_factory=dict)


class ResultsStore(JobLocks):
    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else DEFAULT_ROOT
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.parquet"

    def exists(self, job_id: str) -> bool:
        return self.path(job_id).is_file()

    # ------------------------------------------------------------------ results
    def write(self, job_id: str, frame: pd.DataFrame, metadata: dict | None = None,
              code: dict | None = None) -> Path:
        """Atomically write ``frame`` with ``metadata`` (JSON), ``code`` (default: this process's
        ``job_code()``), its identity and their checksum in the parquet schema."""
        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_USER] = stamp(metadata or {})
        meta[_CODE] = stamp(code or job_code())
        meta[_ID] = stamp(identity(job_id, metadata or {}))
        table = table.replace_schema_metadata(meta)
        table = table.replace_schema_metadata({**meta, _SUM: _digest(table).encode()})
        return atomic_write(self.path(job_id), lambda f: pq.write_table(table, f))

    def _load(self, job_id: str) -> tuple[pa.Table | None, Verdict]:
        """The table and its verdict (without reading a missing or unreadable file twice)."""
        if not self.exists(job_id):
            return None, Verdict("missing")
        try:
            table = pq.read_table(self.path(job_id))
            meta = table.schema.metadata or {}
            if _SUM not in meta and _CODE not in meta and b"pandas" in meta:
                table.to_pandas()  # readable at all?
                return table, Verdict("stale", "written before results carried provenance")
            if _SUM not in meta or _CODE not in meta:
                return None, Verdict("corrupt", "its checksum or code stamp is missing")
            if meta[_SUM].decode() != _digest(table):
                return None, Verdict("corrupt", "checksum mismatch")
            code = json.loads(meta[_CODE])
            rows = table.column("job_id").to_pandas() if "job_id" in table.column_names else None
            foreign = mismatch(job_id, json.loads(meta[_ID]) if _ID in meta else None, json.loads(meta[_USER]), rows)
            if foreign:
                return None, Verdict("corrupt", foreign)
        except Exception as err:  # noqa: BLE001 — any unreadable result is corrupt (damaged pandas metadata
            return None, Verdict("corrupt", f"unreadable: {type(err).__name__}")  # raises KeyError, TypeError …)
        why, moved = code_verdict(code)
        return table, Verdict("stale", why, moved) if why else Verdict("ok")

    def state(self, job_id: str) -> str:
        """'missing', 'corrupt', 'stale' (made by other code) or 'ok'; reads and verifies the file."""
        return self._load(job_id)[1].state

    def verdict(self, job_id: str) -> Verdict:
        """``state`` with why: the damage, or the components whose numbers changed."""
        return self._load(job_id)[1]

    def quick_state(self, job_id: str) -> str:
        """``state`` from the file's schema alone, without reading and verifying its data: for
        estimates (a corrupt file whose schema reads counts as 'ok'; ``state`` is the verdict)."""
        if not self.exists(job_id):
            return "missing"
        try:
            meta = pq.read_schema(self.path(job_id)).metadata or {}
            code = json.loads(meta.get(_CODE, b"{}"))
            if mismatch(job_id, json.loads(meta[_ID]) if _ID in meta else None, json.loads(meta.get(_USER, b"{}"))):
                return "corrupt"
        except Exception:  # noqa: BLE001 — unreadable: corrupt
            return "corrupt"
        return "ok" if code and same_code(code) else "stale"

    def read(self, job_id: str) -> pd.DataFrame:
        """The verified frame of ``job_id`` (stale results are returned: the sweep decides on them)."""
        table, verdict = self._load(job_id)
        state = verdict.state
        if state == "missing":
            raise ValueError(f"no results for job {job_id} in {self.root}")
        if state == "corrupt":
            raise ValueError(f"results of job {job_id} in {self.root} are corrupt ({verdict.why}): rerun the "
                             f"sweep to recompute them")
        return table.to_pandas()

    def _schema_json(self, job_id: str, key: bytes) -> dict:
        meta = pq.read_schema(self.path(job_id)).metadata or {}
        return json.loads(meta.get(key, b"{}"))

    def metadata(self, job_id: str) -> dict:
        return self._schema_json(job_id, _USER)

    def code(self, job_id: str) -> dict:
        """The code that made a result: {'version', 'source', 'modules'} ({} for results older than
        provenance; no 'modules' for results older than per-module hashes)."""
        return self._schema_json(job_id, _CODE)

    def read_many(self, job_ids: Iterable[str]) -> pd.DataFrame:
        frames = [self.read(j) for j in job_ids]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def job_ids(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.parquet"))

    def discard(self, job_id: str) -> None:
        self.path(job_id).unlink(missing_ok=True)

    def clean_temp(self) -> list[Path]:
        """Remove the temporary files of writers that died (killed mid-write); returns them."""
        removed = []
        for tmp in self.root.glob(".*~*~*~*.tmp"):
            _, host, pid, _ = tmp.name.split("~")
            if pid.isdigit() and not process_alive(host, int(pid)):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        return removed
