"""Job claims: a lock file per job in a results folder, so that two sweeps compute each job once.

``claim`` takes a job's lock (O_EXCL, with the owner's host, pid and start time); a lock whose owner
is dead is stale and taken over, with a warning; a lock without a readable owner (its writer died
between creating and writing it) is stale once this process has seen it so for
``HALF_WRITTEN_SECONDS`` — judged by this process's monotonic clock, never by the file's timestamp,
which another host's clock (or a skewed one) may have set a day ahead. Another host's owner cannot
be checked: ``run_sweep`` waits for it, up to its ``lock_timeout``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path

from sandbox.core.processes import HOST, process_alive, start_time

log = logging.getLogger("sandbox.jobs.store")


class JobLocks:
    """The claims half of ``ResultsStore`` (needs ``self.root``)."""

    #: a lock without a readable owner this long (seen by this process: its writer writes it at once) is stale
    HALF_WRITTEN_SECONDS = 5.0
    root: Path

    def lock_path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.lock"

    def claim(self, job_id: str) -> bool:
        """Take the job's lock for this process: True if taken (created, or a dead owner's stale
        lock taken over), False while another live process holds it."""
        lock = self.lock_path(job_id)
        me = json.dumps({"host": HOST, "pid": os.getpid(), "start": start_time(os.getpid())})
        for _ in range(3):  # a lost race over a stale lock is retried
            try:
                with open(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "w") as f:
                    f.write(me)
                return True
            except FileExistsError:
                pass
            try:
                owner = lock.read_text()
                if owner == me:
                    return True  # this process holds it already
                if process_alive(**json.loads(owner)):
                    return False
            except FileNotFoundError:
                continue  # released meanwhile
            except (ValueError, TypeError):  # a half-written lock: its owner died between create and write,
                owner = None  # judged by how long this process has seen it so, not by its timestamp (clock skew)
                seen = self.__dict__.setdefault("_unreadable", {}).setdefault(lock, time.monotonic())
                if time.monotonic() - seen < self.HALF_WRITTEN_SECONDS:
                    return False
            log.warning("taking over the stale lock %s: %s", lock,
                        "its owner died while writing it" if owner is None else
                        f"its owner, pid {json.loads(owner)['pid']} on this host, is no longer running")
            self._take_over(lock, owner)
        return False

    def lock_owner(self, job_id: str) -> dict | None:
        """Who holds the job's lock: {'host', 'pid', 'start', 'since' (the lock's mtime, epoch
        seconds)}, or None when it is free or unreadable."""
        lock = self.lock_path(job_id)
        try:
            return {**json.loads(lock.read_text()), "since": lock.stat().st_mtime}
        except (OSError, ValueError, TypeError):
            return None

    @staticmethod
    def _take_over(lock: Path, owner: str | None) -> None:
        """Remove a stale lock, unless another process replaced it since we read it (then put it back)."""
        aside = lock.with_name(f"{lock.name}~{os.getpid()}~{uuid.uuid4().hex[:8]}")
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            return
        if owner is not None and aside.read_text() != owner:
            try:
                os.link(aside, lock)  # a fresh lock was moved: restore it (fails if one exists again)
            except FileExistsError:
                pass
        aside.unlink(missing_ok=True)

    def release(self, job_id: str) -> None:
        """Drop this process's lock on ``job_id`` (a lock held by another process is left alone)."""
        lock = self.lock_path(job_id)
        try:
            owner = json.loads(lock.read_text())
        except (FileNotFoundError, ValueError):
            return
        if owner.get("host") == HOST and owner.get("pid") == os.getpid():
            lock.unlink(missing_ok=True)


__all__ = ["JobLocks"]
