"""Nothing silently wrong (issue 36): every damaged byte of a stored result or of a committed data
file is named and recomputed, never used and never re-exported."""

from __future__ import annotations

import collections

import pandas as pd

from sandbox.jobs.store import ResultsStore


def test_every_single_byte_flip_of_a_stored_result_is_corrupt_or_harmless(tmp_path):
    """A flipped byte anywhere — the pandas metadata included — gives 'corrupt' (named by the
    sweep, recomputed) or a file whose verified frame, metadata and code are unchanged; never an
    exception (a KeyError 'pandas_type' used to stop every later score) and never 'stale'."""
    store = ResultsStore(tmp_path)
    frame = pd.DataFrame({"x": [0.5, 2.0], "s": ["a", "b"]})
    store.write("j", frame, {"fn": "f"})
    code, data = store.code("j"), store.path("j").read_bytes()
    outcomes = collections.Counter()
    for at in range(0, len(data), 3):  # every third byte: the whole file, in a few seconds
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        store.path("j").write_bytes(bytes(damaged))
        state = store.state("j")  # must not raise
        outcomes[state] += 1
        if state == "ok":
            assert store.read("j").equals(frame) and store.metadata("j") == {"fn": "f"} and store.code("j") == code
        assert store.quick_state("j") in ("ok", "corrupt", "stale")  # must not raise either
    assert set(outcomes) <= {"ok", "corrupt"}, outcomes
    assert outcomes["corrupt"] > len(data) // 9, outcomes


# ----------------------------------------------------------------------------- committed per-seed data
import importlib.util  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

from sandbox.analysis import figure_data  # noqa: E402
from sandbox.jobs.sweep import Job, run_sweep  # noqa: E402
from sandbox.runtime.config import RunConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "paper_figures" / "data"


def _flips_benchmark():
    spec = importlib.util.spec_from_file_location("figure_data_flips", ROOT / "benchmarks" / "figure_data_flips.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Three small training jobs, swept and exported as a figure's data file."""
    folder = tmp_path_factory.mktemp("figure")
    base = RunConfig(task="bandit", task_kwargs={"N": 2, "K": 3, "population": 2}, steps=6, log_points=3)
    jobs = [Job.training(base.replace(seed=s)) for s in range(3)]
    store = ResultsStore(folder / "results")
    run_sweep(jobs, store, workers=1, progress=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figure_data, "GROUP_JOBS", 1)  # a row group per job: a damaged group is one job
        return jobs, store, figure_data.export(jobs, store, folder / "fig.parquet")


def _damage_row_group(path: Path, group: int, at: int = 40) -> None:
    """Flip one byte inside the first column chunk of row group ``group``."""
    chunk = pq.ParquetFile(path).metadata.row_group(group).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + min(at, chunk.total_compressed_size - 1)] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_damaged_job_of_a_data_file_is_named_in_one_line_and_recomputed(exported, tmp_path, caplog):
    jobs, store, path = exported
    damaged = tmp_path / "fig.parquet"
    damaged.write_bytes(path.read_bytes())
    victim = jobs[1]
    group = figure_data._index(pq.read_schema(damaged).metadata)[victim.id]["row_group"]
    _damage_row_group(damaged, group)
    fresh = ResultsStore(tmp_path / "fresh")
    with caplog.at_level(logging.WARNING, logger="sandbox.analysis.figure_data"):
        report = figure_data.restore_jobs(damaged, fresh)
    assert sorted(report.written) == sorted(j.id for j in jobs if j is not victim) and list(report.damaged) == [victim.id]
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{damaged}: job {victim.id} is damaged: ") and "recomputed" in line and "\n" not in line
    assert fresh.state(victim.id) == "missing"  # never restored with its damage …
    sweep = run_sweep(jobs, fresh, workers=1, progress=False)
    assert (sweep.skipped, sweep.computed) == (2, 1)  # … but recomputed
    assert fresh.read(victim.id).drop(columns="wall_time").equals(store.read(victim.id).drop(columns="wall_time"))
    figure_data.export(jobs, fresh, tmp_path / "again.parquet")  # what is exported again is the recomputed job
    assert all(frame is not None for _, frame, _, _ in figure_data.read_jobs(tmp_path / "again.parquet"))


def test_a_damaged_row_group_names_every_job_it_holds_and_only_those(exported, tmp_path, monkeypatch):
    """Row groups hold a few consecutive jobs (``GROUP_SECONDS`` of compute, ``GROUP_JOBS`` jobs at most):
    a row group that cannot be read damages its jobs, each named, and no other."""
    jobs, store, _ = exported
    monkeypatch.setattr(figure_data, "GROUP_JOBS", 2)
    path = figure_data.export(jobs, store, tmp_path / "fig.parquet")
    index = figure_data._index(pq.read_schema(path).metadata)
    assert sorted(e["row_group"] for e in index.values()) == [0, 0, 1] and pq.ParquetFile(path).num_row_groups == 2
    _damage_row_group(path, 0)
    report = figure_data.restore_jobs(path, ResultsStore(tmp_path / "r"))
    assert sorted(report.damaged) == sorted(j for j, e in index.items() if e["row_group"] == 0)
    assert report.written == [j for j, e in index.items() if e["row_group"] == 1]
    entries = [(str(i), None, {"seconds": s}, {}) for i, s in enumerate([100, 400, 200, 700, 5, 5])]
    assert figure_data._row_groups(entries) == [0, 0, 1, 2, 3, 3]  # ≤ 600 s a group; a longer job alone


def test_restore_figures_keeps_a_damaged_job_out_of_the_committed_evidence(exported, tmp_path):
    jobs, _, path = exported
    data = tmp_path / "data"
    data.mkdir()
    (data / "fig.parquet").write_bytes(path.read_bytes())
    group = figure_data._index(pq.read_schema(path).metadata)[jobs[0].id]["row_group"]
    _damage_row_group(data / "fig.parquet", group)
    figure = type("Figure", (), {"name": "fig"})
    held = figure_data.restore_figures([figure], {"fig": jobs}, ResultsStore(tmp_path / "r"), data)
    assert held == {j.id for j in jobs[1:]}  # the damaged job is not kept as committed evidence


def test_an_unreadable_index_names_the_file_and_restores_nothing(exported, tmp_path, caplog):
    _, _, path = exported
    data = path.read_bytes()
    footer = struct.unpack("<i", data[-8:-4])[0]
    start = len(data) - 8 - footer  # the footer (schema, index, row groups) zeroed
    (tmp_path / "bad.parquet").write_bytes(data[:start] + bytes(footer) + data[-8:])
    with caplog.at_level(logging.WARNING, logger="sandbox.analysis.figure_data"):
        report = figure_data.restore_jobs(tmp_path / "bad.parquet", ResultsStore(tmp_path / "r"))
    assert not report.written and report.unreadable.startswith(f"{tmp_path / 'bad.parquet'}: its index cannot be read")
    [line] = [r.getMessage() for r in caplog.records]
    assert line.endswith("git checkout the file to restore it; none of its jobs restored")


def test_single_byte_flips_of_a_data_file_never_go_unnoticed(exported):
    """The measurement of benchmarks/figure_data_flips.py on a small file: every flip of a data
    page is named or harmless, none decodes silently and none crashes (issue 36: 374 of 449 flips
    of gate.parquet's pages decoded silently to other numbers)."""
    _, _, path = exported
    counts = _flips_benchmark().measure(path, flips=150, seed=1, all_bytes=False)
    assert counts["unnoticed"] == 0 and counts["crash"] == 0, counts
    assert counts["named"] >= 100, counts
    counts = _flips_benchmark().measure(path, flips=100, seed=2, all_bytes=True)  # footer and index too
    assert counts["unnoticed"] == 0 and counts["crash"] == 0, counts


def test_every_committed_data_file_carries_a_checksum_per_job_and_the_fingerprints_of_its_components():
    files = sorted(DATA.glob("*.parquet"))
    assert len(files) >= 18
    stamped = total = 0
    for path in files:
        index = figure_data._index(pq.read_schema(path).metadata)
        assert all("checksum" in e and "row_group" in e for e in index.values()), path.name
        total += len(index)
        stamped += sum("fingerprints" in e["code"] for e in index.values())
    # three were left without: kondo_compute (wall times), and contamination_cosine and prop1_closed_form, whose
    # numbers today's code does not reproduce (deterministically other numbers): their results count as made by
    # other code (sandbox reproduce keeps them as committed evidence; a sweep would recompute them)
    assert stamped >= total - 3, (stamped, total)
    for _job_id, frame, _entry, why in figure_data.read_jobs(DATA / "gate.parquet"):
        assert frame is not None, why
    flips = _flips_benchmark().measure(DATA / "gate.parquet", flips=60, seed=random.Random(0).randrange(99),
                                       all_bytes=False)
    assert flips["unnoticed"] == 0 and flips["crash"] == 0, flips
