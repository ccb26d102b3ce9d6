"""Results you can trust: checksums, code provenance, permissions, temporary files, claims."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import sandbox
from sandbox.jobs import store as store_module
from sandbox.jobs.store import HOST, ResultsStore, code_version
from sandbox.jobs.sweep import Job, load_results, run_sweep

ROOT = Path(__file__).resolve().parents[2]


def _copy_of_the_package(tmp_path, monkeypatch) -> Path:
    """A copy of the sandbox package that ``code_version`` hashes instead (``monkeypatch.undo()`` and
    ``code_version.cache_clear()`` restore the real one)."""
    package = tmp_path / "sandbox"
    shutil.copytree(Path(sandbox.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    fake = type(sys)("sandbox")
    fake.__file__, fake.__version__ = str(package / "__init__.py"), sandbox.__version__
    monkeypatch.setitem(sys.modules, "sandbox", fake)
    code_version.cache_clear()
    return package

VALUE = 0.123456789


def _jobs(n=3):
    return [Job("tests.reliability.jobs:tick", {"x": i}) for i in range(n)]


@pytest.fixture
def dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_results_carry_code_and_checksum_and_are_world_readable(tmp_path):
    store = ResultsStore(tmp_path)
    frame = pd.DataFrame({"x": [VALUE, 2.0], "s": ["a", "b"]})
    old = os.umask(0o022)
    try:
        store.write("j", frame, {"fn": "f"})
    finally:
        os.umask(old)
    assert (store.path("j").stat().st_mode & 0o777) == 0o644
    assert store.state("j") == "ok" and store.read("j").equals(frame)
    code = store.code("j")
    assert {k: code[k] for k in ("version", "source")} == code_version() == {"version": sandbox.__version__,
                                                                            "source": code_version()["source"]}
    assert "jobs/store.py" in code["modules"]  # the modules the writing process had imported
    assert store.metadata("j") == {"fn": "f"}
    assert store.state("nothing") == "missing"
    store.write("nested", pd.DataFrame({"a": [[1, 2], [3]], "b": [{"x": 1}, {}]}))  # lists and structs
    assert store.state("nested") == "ok"


def _flip_value(path: Path) -> None:
    """Change one stored float in place: a bit flip that parquet itself does not notice."""
    data = bytearray(path.read_bytes())
    at = data.find(struct.pack("<d", VALUE))
    assert at > 0, "the value must be stored uncompressed for this test"
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip"])
def test_a_damaged_result_is_detected_and_recomputed(tmp_path, damage):
    store = ResultsStore(tmp_path)
    store.write("j", pd.DataFrame({"x": [VALUE, 2.0]}))
    path = store.path("j")
    if damage == "flip":
        _flip_value(path)
        assert pd.read_parquet(path).x.iloc[0] != VALUE  # it still loads, with a wrong number
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if damage == "truncate" else b"")
    assert store.state("j") == "corrupt"
    with pytest.raises(ValueError, match="corrupt"):
        store.read("j")

    jobs = _jobs(3)
    run_sweep(jobs, store, workers=1, progress=False)
    victim = jobs[1].id
    shutil.copy(path, store.path(victim))  # a damaged file under a job's name
    before = {j.id: store.path(j.id).stat().st_mtime_ns for j in jobs if j.id != victim}
    report = run_sweep(jobs, store, workers=1, progress=False)
    assert (report.skipped, report.computed, report.recomputed) == (2, 1, {victim: "corrupt"})
    assert {j: store.path(j).stat().st_mtime_ns for j in before} == before
    assert load_results(jobs, store).sort_values("x").x.tolist() == [0, 1, 2]


def test_a_change_of_the_library_source_changes_the_code_hash(tmp_path, monkeypatch):
    package = _copy_of_the_package(tmp_path, monkeypatch)
    try:
        same = code_version()
        assert same == {**same, "version": sandbox.__version__}
        code_version.cache_clear()
        with open(package / "estimators" / "__init__.py", "a") as f:
            f.write("\n# an edit\n")
        assert code_version()["source"] != same["source"]
    finally:
        monkeypatch.undo()
        code_version.cache_clear()
    assert code_version()["source"] == same["source"]  # the copy hashes like the original


def test_results_of_other_code_are_recomputed_or_accepted_on_request(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    jobs = _jobs(2)
    run_sweep(jobs, store, workers=1, progress=False)
    edited = {"version": sandbox.__version__, "source": "0123456789abcdef"}
    monkeypatch.setattr(store_module, "code_version", lambda: edited)  # as if an estimator was edited
    monkeypatch.setattr(store_module, "_file_hash", lambda path: "edited")  # ... every module of the jobs
    # a refactor that changes no number keeps the numerics version: the results stay valid
    assert run_sweep(jobs, store, workers=1, progress=False).skipped == 2
    monkeypatch.setattr(store_module, "NUMERICS", store_module.NUMERICS + 1)  # an edit that changes numbers
    accepted = run_sweep(jobs, store, workers=1, progress=False, accept_stale_code=True)
    assert (accepted.skipped, accepted.computed, sorted(accepted.accepted_stale)) == (2, 0, sorted(j.id for j in jobs))
    report = run_sweep(jobs, store, workers=1, progress=False)
    assert report.computed == 2 and report.recomputed == {j.id: "stale" for j in jobs}
    assert all({k: v for k, v in store.code(j.id).items() if k not in ("modules", "numerics", "fingerprints", "portable", "platform", "paths")} == edited for j in jobs)
    assert run_sweep(jobs, store, workers=1, progress=False).skipped == 2


def test_results_without_provenance_count_as_stale(tmp_path):
    store = ResultsStore(tmp_path)
    pd.DataFrame({"x": [1]}).to_parquet(store.path("old"))  # as written before provenance existed
    assert store.state("old") == "stale" and store.code("old") == {}


def test_temporary_files_of_dead_writers_are_removed(tmp_path, dead_pid):
    store = ResultsStore(tmp_path)
    stale = tmp_path / f".j~{HOST}~{dead_pid}~abcd1234.tmp"
    live = tmp_path / f".j~{HOST}~{os.getpid()}~abcd1234.tmp"
    remote = tmp_path / f".j~another-host~{dead_pid}~abcd1234.tmp"
    for p in (stale, live, remote):
        p.write_bytes(b"PAR1 half a file")
    run_sweep(_jobs(1), store, workers=1, progress=False)
    assert not stale.exists() and live.exists() and remote.exists()


def test_claims_are_exclusive_and_stale_ones_are_taken_over(tmp_path, dead_pid):
    store = ResultsStore(tmp_path)
    assert store.claim("a") and store.claim("a")  # re-entrant for its owner
    assert json.loads(store.lock_path("a").read_text())["pid"] == os.getpid()
    store.lock_path("b").write_text(json.dumps({"host": HOST, "pid": os.getppid(), "start": None}))
    assert not store.claim("b")  # a live owner keeps it
    store.release("b")
    assert store.lock_path("b").exists()  # only the owner releases
    store.lock_path("c").write_text(json.dumps({"host": HOST, "pid": dead_pid, "start": None}))
    assert store.claim("c")  # a dead owner's lock is taken over
    reused = json.loads(store.lock_path("a").read_text()) | {"start": "1"}  # our pid, another process
    store.lock_path("d").write_text(json.dumps(reused))
    assert store.claim("d")
    store.release("a")
    assert not store.lock_path("a").exists()


def test_bad_sweep_arguments(tmp_path):
    store = ResultsStore(tmp_path)
    with pytest.raises(ValueError, match=r"workers must be None or an integer in 1\.\.\d+"):
        run_sweep(_jobs(1), store, workers=0)
    with pytest.raises(ValueError, match="jobs must be Job instances"):
        run_sweep(["m:f"], store)
    with pytest.raises(ValueError, match="store must be a ResultsStore"):
        run_sweep(_jobs(1), str(tmp_path))
    with pytest.raises(ValueError, match="plugins must be a list"):
        run_sweep(_jobs(1), store, plugins="my.py")
    with pytest.raises(ValueError, match="plugin file 'missing.py' does not exist"):
        run_sweep(_jobs(1), store, plugins=["missing.py"])
    with pytest.raises(ValueError, match="job threads must be an integer >= 1"):
        Job("m:f", threads=0)


def test_presentation_modules_are_left_out_of_the_code_hash_and_no_job_imports_them(tmp_path, monkeypatch):
    """Editing a presentation module keeps stored results valid; that is sound only because no job's
    code imports one: a training run (sampled, exact, screened, stale, with frictions), a sweep in
    worker processes and every figure family's job functions leave them all unimported."""
    from sandbox.jobs.store import PRESENTATION

    package = _copy_of_the_package(tmp_path, monkeypatch)
    try:
        before = code_version()["source"]
        for name in PRESENTATION:
            assert (package / name).is_file(), name
            with open(package / name, "a") as f:
                f.write("\n# an edit\n")
        code_version.cache_clear()
        assert code_version()["source"] == before
    finally:
        monkeypatch.undo()
        code_version.cache_clear()
    modules = ["sandbox." + n.removesuffix(".py").replace("/", ".") for n in PRESENTATION]
    script = f"""
import sys
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.jobs import sweep
from sandbox.runtime import ray_async
import sandbox.jobs.pool, sandbox.diagnostics, sandbox.controllers
import simulations.bandit_theory, simulations.mnist, simulations.sequences, simulations.llm
for cfg in (RunConfig(task="bandit", task_kwargs={{"K": 4, "batch_size": 8}}, steps=2, staleness={{"kind": "fixed", "D": 1}}),
            RunConfig(task="bandit", task_kwargs={{"K": 4, "batch_size": 8, "mode": "exact"}}, advantage="constant", steps=2),
            RunConfig(task="reverse_copy", task_kwargs={{"H": 2, "backward": "screened"}}, estimator="kondo", steps=2,
                      frictions=(("landmine", {{"p_bug": 0.5}}),))):
    train(cfg)
leaked = [m for m in {modules!r} if m in sys.modules]
assert not leaked, leaked
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_a_result_stays_valid_while_the_modules_its_job_imported_are_unchanged(tmp_path, monkeypatch):
    """job_code() records a hash per imported sandbox module: an edit elsewhere in the package
    keeps the result 'ok'; an edit of one of its modules makes it 'stale'."""
    from sandbox.jobs.store import job_code

    package = _copy_of_the_package(tmp_path, monkeypatch)
    store = ResultsStore(tmp_path / "r")
    try:
        code = {**code_version(), "modules": {"core/rollout.py": store_module._file_hash(package / "core/rollout.py")}}
        store.write("j", pd.DataFrame({"x": [1.0]}), {"fn": "f"}, code)
        assert store.state("j") == "ok"
        with open(package / "scoring" / "runner.py", "a") as f:  # not a module of this job
            f.write("\n# an edit\n")
        code_version.cache_clear()
        assert code_version()["source"] != code["source"] and store.state("j") == "ok"
        with open(package / "core" / "rollout.py", "a") as f:  # one of its modules
            f.write("\n# an edit\n")
        assert store.state("j") == "stale"
        store.write("k", pd.DataFrame({"x": [1.0]}), {"fn": "f"}, {k: v for k, v in code.items() if k != "modules"})
        assert store.state("k") == "stale"  # no per-module record: the whole-package hash decides
    finally:
        monkeypatch.undo()
        code_version.cache_clear()
    recorded = job_code()["modules"]
    assert "core/rollout.py" in recorded and "reproduce.py" not in recorded
