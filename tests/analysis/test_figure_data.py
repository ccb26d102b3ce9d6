"""A figure's per-seed data: exported into one file, restored into a store exactly as stored, and
kept by a sweep even when other code made it (the committed paper-tier evidence)."""

from __future__ import annotations

import pandas as pd

from sandbox.analysis import figure_data
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, run_sweep
from sandbox.runtime.config import RunConfig


def _jobs():
    base = RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=4, log_points=2)
    return [Job.training(base.replace(seed=s, estimator=e)) for s in (0, 1) for e in ("dg", "reinforce")]


def test_export_then_restore_gives_back_every_result_as_it_was_stored(tmp_path):
    jobs = _jobs()
    store = ResultsStore(tmp_path / "a")
    run_sweep(jobs, store, workers=1, progress=False)
    path = figure_data.export(jobs, store, tmp_path / "data" / "fig.parquet")
    assert figure_data.jobs_in(path) == {j.id for j in jobs}
    fresh = ResultsStore(tmp_path / "b")
    assert sorted(figure_data.restore(path, fresh)) == sorted(j.id for j in jobs)
    for job in jobs:
        pd.testing.assert_frame_equal(fresh.read(job.id), store.read(job.id))
        assert fresh.metadata(job.id) == store.metadata(job.id) and fresh.code(job.id) == store.code(job.id)
        assert fresh.state(job.id) == "ok"
    assert figure_data.restore(path, fresh) == []  # nothing missing: nothing rewritten
    report = run_sweep(jobs, fresh, workers=1, progress=False)
    assert report.computed == 0 and report.skipped == len(jobs)  # resumed from the data: no job reruns


def test_results_made_by_other_code_are_restored_and_kept_only_when_accepted(tmp_path):
    jobs = _jobs()
    store = ResultsStore(tmp_path / "a")
    run_sweep(jobs, store, workers=1, progress=False)
    for job in jobs:  # as if an older commit had made them
        store.write(job.id, store.read(job.id), store.metadata(job.id), code={"version": "0.0.0", "source": "old"})
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet")
    fresh = ResultsStore(tmp_path / "b")
    figure_data.restore(path, fresh)
    assert {fresh.state(j.id) for j in jobs} == {"stale"}
    kept = run_sweep(jobs, fresh, workers=1, progress=False, accept_stale_code={jobs[0].id})
    assert kept.accepted_stale == [jobs[0].id] and kept.computed == len(jobs) - 1


def test_a_file_with_the_uncompressed_index_of_earlier_exports_still_restores(tmp_path):
    import json

    import pyarrow.parquet as pq

    jobs = _jobs()
    store = ResultsStore(tmp_path / "a")
    run_sweep(jobs, store, workers=1, progress=False)
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet")
    table = pq.read_table(path)
    index = {job: {k: v for k, v in entry.items() if k not in ("row_group", "checksum")}  # as written before
             for job, entry in figure_data._index(table.schema.metadata).items()}
    meta = {k: v for k, v in table.schema.metadata.items() if k != figure_data._KEY}
    pq.write_table(table.replace_schema_metadata({**meta, figure_data._PLAIN_KEY: json.dumps(index).encode()}),
                   tmp_path / "old.parquet")
    assert figure_data.jobs_in(tmp_path / "old.parquet") == {j.id for j in jobs}
    fresh = ResultsStore(tmp_path / "b")
    assert sorted(figure_data.restore(tmp_path / "old.parquet", fresh)) == sorted(j.id for j in jobs)
    pd.testing.assert_frame_equal(fresh.read(jobs[0].id), store.read(jobs[0].id))


def test_a_figure_keeps_the_columns_its_notebook_reads_some_in_single_precision(tmp_path):
    import numpy as np
    import pytest

    jobs = _jobs()
    store = ResultsStore(tmp_path / "a")
    run_sweep(jobs, store, workers=1, progress=False)
    spec = figure_data.DataSpec(columns=("run_id", "job_id", "member", "step", "diverged", "error", "ess_frac"),
                                float32=("error",))
    full = figure_data.export(jobs, store, tmp_path / "full.parquet")
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet", spec)
    assert path.stat().st_size < full.stat().st_size
    fresh = ResultsStore(tmp_path / "b")
    assert sorted(figure_data.restore(path, fresh)) == sorted(j.id for j in jobs)  # each verified by its checksum
    for job in jobs:
        stored, restored = store.read(job.id), fresh.read(job.id)
        assert list(restored.columns) == [c for c in stored.columns if c in spec.columns]
        assert restored["error"].dtype == np.float32 and restored["ess_frac"].dtype == np.float64
        np.testing.assert_allclose(restored["error"], stored["error"], rtol=1e-7)
        pd.testing.assert_series_equal(restored["ess_frac"], stored["ess_frac"])
        assert fresh.metadata(job.id) == store.metadata(job.id) and fresh.code(job.id) == store.code(job.id)
    # exported again from the restored results: the same frames, the same checksums
    again = figure_data.export(jobs, fresh, tmp_path / "again.parquet", spec)
    index = {j: e["checksum"] for j, _, e, _ in figure_data.read_jobs(path)}
    assert {j: e["checksum"] for j, _, e, _ in figure_data.read_jobs(again)} == index
    with pytest.raises(ValueError, match="float32 must name kept columns, got \\['error'\\]: not in columns"):
        figure_data.DataSpec(columns=("step",), float32=("error",))
    with pytest.raises(ValueError, match="floating-point columns"):
        figure_data.export(jobs, store, tmp_path / "x.parquet", figure_data.DataSpec(float32=("step",)))
    with pytest.raises(ValueError, match="no job of x.parquet holds: \\['errr'\\]"):
        figure_data.export(jobs, store, tmp_path / "x.parquet", figure_data.DataSpec(columns=("step", "errr")))


def test_a_figure_may_instead_drop_the_columns_it_never_reads(tmp_path):
    import pytest

    jobs = _jobs()
    store = ResultsStore(tmp_path / "a")
    run_sweep(jobs, store, workers=1, progress=False)
    spec = figure_data.DataSpec(drop=("ratio_min", "ratio_max", "wall_time"))
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet", spec)
    fresh = ResultsStore(tmp_path / "b")
    assert sorted(figure_data.restore(path, fresh)) == sorted(j.id for j in jobs)
    for job in jobs:
        stored, restored = store.read(job.id), fresh.read(job.id)
        assert {"ratio_min", "ratio_max", "wall_time"} <= set(stored.columns)
        kept = [c for c in stored.columns if c not in spec.drop]
        assert list(restored.columns) == kept and len(kept) == len(stored.columns) - 3
        pd.testing.assert_frame_equal(restored, stored[kept])  # the rest exactly as stored
    again = figure_data.export(jobs, fresh, tmp_path / "again.parquet", spec)
    assert ({j: e["checksum"] for j, _, e, _ in figure_data.read_jobs(again)}
            == {j: e["checksum"] for j, _, e, _ in figure_data.read_jobs(path)})
    with pytest.raises(ValueError, match="columns .* or drop .*, not both"):
        figure_data.DataSpec(columns=("step",), drop=("error",))
    with pytest.raises(ValueError, match="float32 must name kept columns, got \\['error'\\]: dropped"):
        figure_data.DataSpec(drop=("error",), float32=("error",))


def test_a_committed_data_file_holds_what_its_figure_keeps():
    from pathlib import Path

    import pyarrow.parquet as pq

    import simulations

    data = Path(__file__).resolve().parents[2] / "paper_figures" / "data"
    checked = 0
    for name, figure in simulations.load_families().items():
        path = data / f"{name}.parquet"
        spec = figure_data.DataSpec.of(figure.data_spec)
        if spec is None or not path.is_file():
            continue
        for job, entry in figure_data._index(pq.read_schema(path).metadata).items():
            assert set(entry["columns"]) <= set(spec.columns or entry["columns"]), (name, job)
            assert not set(entry["columns"]) & set(spec.drop), (name, job)
            assert {entry["dtypes"][c] for c in spec.float32 if c in entry["columns"]} <= {"float32"}
        checked += 1
    assert checked >= 2
    # bytes at most, a few percent above the size each was committed at (every column in float64 before)
    small = {"async-signatures": 440_000,  # 3.39 MB before
             "prop2-multi-context": 530_000,  # 1.83 MB before; its reference cosines stay float64
             "early-warning": 2_850_000,  # 4.02 MB before: 6 logged signals it never reads dropped
             "published-outcomes": 800_000}  # 1.10 MB before: the same 6 (they share 30 jobs)
    for name, limit in small.items():
        assert (data / f"{name}.parquet").stat().st_size < limit, name
    for path in data.glob("*.parquet"):  # the repository's limit on one committed file
        assert path.stat().st_size < 3_000_000, path.name


def test_a_job_two_committed_data_files_hold_is_the_same_in_both():
    """A results store restores a job from the first figure's file that holds it (``restore_figures``
    skips a job the store holds), so two files must hold it alike — one figure's DataSpec trimming a job
    another figure reads in full (early-warning and published-outcomes share 30) would hand that figure
    the trimmed frame whenever its file restores second."""
    from pathlib import Path

    import pyarrow.parquet as pq

    data = Path(__file__).resolve().parents[2] / "paper_figures" / "data"
    first: dict[str, tuple[str, str]] = {}
    shared = 0
    for path in sorted(data.glob("*.parquet")):
        for job, entry in figure_data._index(pq.read_schema(path).metadata).items():
            if job in first:
                shared += 1
                assert first[job][1] == entry["checksum"], (job, first[job][0], path.name)
            else:
                first[job] = (path.name, entry["checksum"])
    assert shared > 0  # the files do share jobs (169 when written), so the check reads something
