"""No result without its own identity (issue 46, R1/R2): another job's valid file copied or linked
over a job's file, or committed data that hold another job's rows, verify by their checksums but
are named — both jobs — and recomputed, never reused."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pyarrow.parquet as pq
import pytest

from sandbox.analysis import figure_data
from sandbox.jobs import store as store_module
from sandbox.jobs.identity import definition_hash
from sandbox.jobs.store import ResultsStore, frame_digest
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig


def _jobs() -> list[Job]:
    base = RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=3, log_points=2)
    return [Job.training(base.replace(seed=s)) for s in range(3)]


def _swept(tmp_path):
    store, jobs = ResultsStore(tmp_path), _jobs()
    assert run_sweep(jobs, store, workers=1, progress=False).computed == 3
    return store, jobs


def _recomputed_naming(store, jobs, victim, source, caplog) -> None:
    with pytest.raises(ValueError, match=f"another job's result in the place of job {victim}.*{source}"):
        store.read(victim)
    with caplog.at_level(logging.WARNING, logger="sandbox.jobs.sweep"):
        report = run_sweep(jobs, store, workers=1, progress=False)
    assert report.recomputed == {victim: "corrupt"} and (report.skipped, report.computed) == (2, 1)
    line = next(r.getMessage() for r in caplog.records if "corrupt" in r.getMessage())
    assert victim in line and source in line, line
    assert set(store.read(victim)["job_id"]) == {victim} and store.state(victim) == "ok"


@pytest.mark.parametrize("how", ["copied", "linked"])
def test_another_jobs_valid_file_over_a_jobs_file_is_named_and_recomputed(tmp_path, caplog, how):
    store, jobs = _swept(tmp_path / "r")
    victim, source = jobs[0].id, jobs[1].id
    if how == "copied":
        shutil.copyfile(store.path(source), store.path(victim))
    else:
        store.path(victim).unlink()
        os.symlink(store.path(source), store.path(victim))
    assert store.verdict(victim).state == "corrupt" and store.quick_state(victim) == "corrupt"
    _recomputed_naming(store, jobs, victim, source, caplog)


def test_a_result_written_before_identities_is_checked_by_its_metadata_and_rows(tmp_path, caplog):
    """A file of the format before issue 46 (no identity stamp, its checksum without one) stays
    valid as its own job's result; copied over another job's, its metadata and rows name it."""
    store, jobs = _swept(tmp_path / "r")
    for job in jobs:  # strip the identity, as written before issue 46
        table = pq.read_table(store.path(job.id))
        meta = {k: v for k, v in table.schema.metadata.items() if k != store_module._ID}
        meta[store_module._SUM] = frame_digest(table.to_pandas(), meta[store_module._USER],
                                               meta[store_module._CODE]).encode()
        pq.write_table(table.replace_schema_metadata(meta), store.path(job.id))
    assert all(store.state(j.id) == "ok" for j in jobs)
    victim, source = jobs[2].id, jobs[0].id
    shutil.copyfile(store.path(source), store.path(victim))
    assert store.verdict(victim).why.endswith(f"its metadata define job {source} (train_job, 'reinforce'); "
                                              f"its rows are job {source}'s")
    _recomputed_naming(store, jobs, victim, source, caplog)


def test_committed_data_holding_another_jobs_rows_are_named_and_recomputed(tmp_path, caplog):
    store, jobs = _swept(tmp_path / "filled")
    victim, source = jobs[1].id, jobs[2].id
    entries = [(j.id, store.read(source if j.id == victim else j.id), store.metadata(source if j.id == victim else j.id),
                store.code(j.id)) for j in jobs]
    path = figure_data.write(entries, tmp_path / "figure.parquet")  # the victim's entry: the source's rows
    fresh = ResultsStore(tmp_path / "fresh")
    assert sorted(figure_data.restore(path, fresh)) == sorted(j.id for j in jobs)
    assert fresh.verdict(victim).state == "corrupt" and f"define job {source}" in fresh.verdict(victim).why
    _recomputed_naming(fresh, jobs, victim, source, caplog)


def test_every_result_carries_its_identity_inside_its_checksum(tmp_path):
    store, jobs = _swept(tmp_path / "r")
    meta = pq.read_schema(store.path(jobs[0].id)).metadata
    assert json.loads(meta[store_module._ID]) == {"job": jobs[0].id, "config": jobs[0].id}  # a run: its config hash
    assert definition_hash(store.metadata(jobs[0].id)) == jobs[0].id
    table = pq.read_table(store.path(jobs[0].id))  # an identity edited to another job's: the checksum fails
    forged = {**meta, store_module._ID: json.dumps({"job": jobs[1].id, "config": jobs[1].id}).encode()}
    pq.write_table(table.replace_schema_metadata(forged), store.path(jobs[0].id))
    assert store.verdict(jobs[0].id).why == "checksum mismatch"
