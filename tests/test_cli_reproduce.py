"""``sandbox reproduce``: where figures go, notebooks not re-executed when nothing changed, the Ray
address reaches the sweep, and Ctrl-C stops everything at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import sandbox.reproduce as rep
from sandbox.jobs.store import ResultsStore, read_record, write_record
from sandbox.jobs.sweep import Job
from tests.reliability.test_processes import terminal_sigint

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_quick_figures_never_overwrite_the_paper_figures(monkeypatch):
    monkeypatch.delenv("SANDBOX_FIGURES", raising=False)
    assert rep.default_figures_dir("quick") == Path("figures/quick")
    assert rep.default_figures_dir("paper") == Path("paper_figures")
    assert rep.default_figures_dir("full") == Path("figures/full")
    assert "/figures/" in (ROOT / ".gitignore").read_text().splitlines()
    monkeypatch.setenv("SANDBOX_FIGURES", "/tmp/elsewhere")
    assert rep.default_figures_dir("quick") == Path("/tmp/elsewhere")
    with pytest.raises(ValueError, match="fidelity must be one of"):
        rep.default_figures_dir("draft")


def test_notebook_key_follows_source_results_and_settings_not_places(tmp_path):
    store = ResultsStore(tmp_path / "r")
    jobs = [Job("m:f", {"a": 1}), Job("m:f", {"a": 2})]
    for i, job in enumerate(jobs):
        store.write(job.id, pd.DataFrame({"x": [i]}))
    source = tmp_path / "nb.py"
    source.write_text("# %%\n1\n")
    env = {"SANDBOX_FIDELITY": "quick", "SANDBOX_FIGURES": "/a", "SANDBOX_RESULTS": "/b", "SANDBOX_WORKERS": "1"}
    key = rep.notebook_key(source, jobs, store, env)
    assert rep.notebook_key(source, jobs[::-1], store, {**env, "SANDBOX_FIGURES": "/c", "SANDBOX_WORKERS": "4"}) == key
    assert rep.notebook_key(source, jobs, store, {**env, "SANDBOX_FIDELITY": "full"}) != key
    assert rep.notebook_key(source, jobs[:1], store, env) != key
    store.write(jobs[0].id, pd.DataFrame({"x": [7]}))  # a recomputed result
    changed = rep.notebook_key(source, jobs, store, env)
    assert changed != key
    source.write_text("# %%\n2\n")
    assert rep.notebook_key(source, jobs, store, env) != changed
    module = tmp_path / "figs.py"
    module.write_text("CLAIM = 1\n")
    with_code = rep.notebook_key(source, jobs, store, env, [module])
    module.write_text("CLAIM = 2\n")  # a figure module's claim code changed: execute again
    assert rep.notebook_key(source, jobs, store, env, [module]) != with_code


def test_a_second_reproduce_reuses_unchanged_notebooks(tmp_path, monkeypatch):
    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "notebooks_dir": tmp_path / "nb"}
    (first,) = rep.reproduce(["gate"], workers=1, progress=False, **dirs)
    assert first.ok and not first.cached

    def not_again(*args, **kwargs):
        raise AssertionError("a notebook whose inputs did not change was executed again")

    monkeypatch.setattr(rep, "execute_notebook", not_again)
    (second,) = rep.reproduce(["gate"], workers=1, progress=False, **dirs)
    assert second.ok and second.cached
    assert [c.name for c in second.claims] == [c.name for c in first.claims]
    assert [p.name for p in second.files] == ["gate.pdf", "gate.png"]
    assert "ok (cached)" in rep.summary([second])
    (forced,) = rep.reproduce(["gate"], workers=1, progress=False, rerun=True, **dirs)
    assert forced.error and "executed again" in forced.error  # --rerun executes it
    assert not forced.claims  # and a failing notebook shows no stale claims


def test_a_missing_figure_file_means_executing_again(tmp_path, monkeypatch):
    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "notebooks_dir": tmp_path / "nb"}
    executed = []
    monkeypatch.setattr(rep, "execute_notebook", lambda *a, **k: executed.append(a))
    claims = tmp_path / "r" / "claims" / "gate.quick.json"
    claims.parent.mkdir(parents=True)
    (tmp_path / "f").mkdir()
    rep.reproduce(["gate"], workers=1, progress=False, **dirs)  # records the (fake) execution
    assert len(executed) == 1
    record = tmp_path / "r" / "notebooks" / "gate.quick.json"
    key = read_record(record)[0]["key"]

    def recorded_with_figure() -> None:  # as if the last execution had written gate.png and its claims
        write_record(record, {"key": key, "files": ["gate.png"]})
        write_record(claims, [])

    recorded_with_figure()
    rep.reproduce(["gate"], workers=1, progress=False, **dirs)
    assert len(executed) == 2  # gate.png is not there
    (tmp_path / "f" / "gate.png").write_bytes(b"")
    recorded_with_figure()
    rep.reproduce(["gate"], workers=1, progress=False, **dirs)
    assert len(executed) == 2  # now it is: reused


def test_the_ray_address_reaches_the_sweep(tmp_path, monkeypatch):
    seen = {}

    def fake_sweep(jobs, store, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(rep, "run_sweep", fake_sweep)
    (outcome,) = rep.reproduce(["gate"], results_dir=tmp_path, figures_dir=tmp_path, backend="ray",
                               ray_address="10.0.0.1:6379", progress=False)
    assert seen["ray_address"] == "10.0.0.1:6379" and seen["backend"] == "ray"
    assert "stop here" in outcome.error


@pytest.mark.slow
def test_ctrl_c_during_a_notebook_stops_everything_and_keeps_finished_results(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "sandbox.cli", "reproduce", "gate", "prop1-single-context",
                             "--workers", "1", "--results", "r", "--figures", "f"], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_sigint)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    while "gate notebook" not in "".join(err) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert "gate notebook" in "".join(err), "".join(err)
    time.sleep(2)  # the kernel is starting or running the notebook's cells
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    assert proc.wait(timeout=120) == 130
    reader.join(timeout=10)
    text = "".join(err)
    assert text.rstrip().splitlines()[-1] == ("sandbox: interrupted; finished results are kept in r/; "
                                              "rerun the same command to resume")
    assert "ERROR" not in text and "Traceback" not in text, text
    assert "prop1" not in out + text  # it did not go on to the next figure
    assert list((tmp_path / "r").glob("*.parquet")), "the finished sweep of gate was lost"
    assert not (tmp_path / "r" / "notebooks" / "gate.quick.json").exists()  # the notebook did not finish


def test_paper_fidelity_writes_claims_md_and_a_resumed_run_rewrites_it_from_the_records(tmp_path, monkeypatch):
    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "notebooks_dir": tmp_path / "nb"}
    (first,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert first.ok and first.record["fidelity"] == "paper" and first.record["jobs"] >= 1
    assert "fidelity=paper" in first.record["note"] and first.record["notebook_seconds"] > 0
    claims_md = (tmp_path / "f" / "CLAIMS.md").read_text()
    assert "# Claims at paper fidelity" in claims_md and "`sandbox reproduce --fidelity paper --workers 1`" in claims_md
    gate_rows = [line for line in claims_md.splitlines() if line.startswith("| `gate` |")]
    assert len(gate_rows) == 1 + len(first.claims)  # its figure row and one row per claim
    assert "| `prop1-single-context` | not run yet at paper fidelity |" in claims_md
    (tmp_path / "f" / "CLAIMS.md").unlink()
    monkeypatch.setattr(rep, "execute_notebook", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-executed")))
    (second,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    def without_totals(text: str) -> list[str]:  # the totals line says how long the last invocation took
        return [line for line in text.splitlines() if not line.startswith("Compute:")]

    assert second.cached and without_totals((tmp_path / "f" / "CLAIMS.md").read_text()) == without_totals(claims_md)
    monkeypatch.undo()
    (quick,) = rep.reproduce(["gate"], fidelity="quick", workers=1, progress=False,
                             **{**dirs, "figures_dir": tmp_path / "f2"})
    assert quick.ok and not (tmp_path / "f2" / "CLAIMS.md").exists()  # only the paper tier writes one


def test_a_figure_whose_claims_fail_is_listed_in_claims_md_with_its_fail_and_executed_again(tmp_path, monkeypatch):
    from sandbox.analysis.claims import ClaimBook

    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "notebooks_dir": tmp_path / "nb"}
    calls = []

    def notebook_with_a_failing_claim(source, output, env, progress=True):
        calls.append(source)
        book = ClaimBook("gate", env["SANDBOX_CLAIMS"])
        book.less("dg-below-pg", "DG's error is below PG's", [0.5, 0.6, 0.7], [0.1, 0.2, 0.1])
        Path(env["SANDBOX_FIGURES"]).mkdir(parents=True, exist_ok=True)
        (Path(env["SANDBOX_FIGURES"]) / "gate.png").write_bytes(b"png")
        book.check()  # raises AssertionError: the claim failed

    monkeypatch.setattr(rep, "execute_notebook", notebook_with_a_failing_claim)
    (first,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert first.made and not first.ok and first.error is None  # a FAIL is a verdict, not an error
    assert "FAIL (1 claim)" in rep.summary([first]) and "1/1 figures made" in rep.summary([first])
    claims_md = (tmp_path / "f" / "CLAIMS.md").read_text()
    assert "**Evidence:** 0 PASS, 1 FAIL, 0 INFO" in claims_md
    assert any(line.startswith("| `gate` | DG's error is below PG's |") and "**FAIL**" in line
               for line in claims_md.splitlines())
    (second,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert not second.ok and not second.cached and len(calls) == 2  # a failure is reported again, not reused

    def crashing_notebook(source, output, env, progress=True):
        raise RuntimeError("a bug in the notebook")

    monkeypatch.setattr(rep, "execute_notebook", crashing_notebook)
    record = tmp_path / "r" / "notebooks" / "gate.paper.json"
    record.unlink()
    (third,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert not third.made and not record.exists()  # a crash records nothing, and deletes no row (issue 46, R2):
    rows = [line for line in (tmp_path / "f" / "CLAIMS.md").read_text().splitlines() if line.startswith("| `gate` |")]
    assert "(last good rows; re-run failed: RuntimeError: a bug in the notebook)" in rows[0]
    assert any("DG's error is below PG's" in row and "**FAIL**" in row for row in rows[1:])
    assert "ERROR RuntimeError: a bug in the notebook" in rep.summary([third])


def test_reproduce_exits_0_with_fails_1_with_strict_and_1_when_a_figure_cannot_be_made(tmp_path, monkeypatch, capsys):
    from sandbox.analysis.claims import ClaimBook
    from sandbox.cli import main

    def failing(source, output, env, progress=True):
        book = ClaimBook("gate", env["SANDBOX_CLAIMS"])
        book.less("dg-below-pg", "DG's error is below PG's", [0.5, 0.6, 0.7], [0.1, 0.2, 0.1])
        Path(env["SANDBOX_FIGURES"]).mkdir(parents=True, exist_ok=True)
        (Path(env["SANDBOX_FIGURES"]) / "gate.png").write_bytes(b"png")
        book.check()

    monkeypatch.setattr(rep, "execute_notebook", failing)
    args = ["reproduce", "gate", "--results", str(tmp_path / "r"), "--figures", str(tmp_path / "f"), "--workers", "1"]
    assert main(args) == 0  # every figure was made: a FAIL is a verdict, printed as one
    out = capsys.readouterr().out
    assert "FAIL (1 claim)" in out and "evidence: 0 PASS, 1 FAIL" in out and "ERROR" not in out
    assert main([*args, "--strict"]) == 1
    monkeypatch.setattr(rep, "execute_notebook", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    assert main(args) == 1 and "ERROR RuntimeError: a bug" in capsys.readouterr().out


def test_a_notebook_keeps_the_restored_committed_results_whatever_code_made_them(tmp_path, monkeypatch):
    """A fresh clone's paper reproduce restores the committed per-seed data and keeps it even where
    other code made it; the notebook's own sweep must keep it too (it recomputed such jobs)."""
    import json

    import simulations

    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "notebooks_dir": tmp_path / "nb"}
    (first,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert first.ok and (tmp_path / "f" / "data" / "gate.parquet").is_file()
    seen = {}
    monkeypatch.setattr(rep, "execute_notebook", lambda source, output, env, **k: seen.update(env))
    rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, rerun=True,
                  **{**dirs, "results_dir": tmp_path / "fresh"})
    kept = json.loads(Path(seen["SANDBOX_KEEP"]).read_text())
    (job,) = simulations.select(["gate"])[0].jobs("paper")
    assert kept == [job.id]
    store = ResultsStore(tmp_path / "fresh")  # the restored result, as if other code had made it
    store.write(job.id, store.read(job.id), store.metadata(job.id), code={"version": "0.0.1", "source": "x"})
    assert store.state(job.id) == "stale"
    monkeypatch.setenv("SANDBOX_KEEP", seen["SANDBOX_KEEP"])
    monkeypatch.setattr("sandbox.jobs.sweep.train_job", lambda **p: (_ for _ in ()).throw(AssertionError("rerun")))
    frame = simulations.results("gate", "paper", store, workers=1, progress=False)
    assert len(frame) and store.state(job.id) == "stale"  # kept, not recomputed
    monkeypatch.setenv("SANDBOX_KEEP", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="^SANDBOX_KEEP: .*missing.json"):
        simulations.results("gate", "paper", store, workers=1, progress=False)


def test_the_summary_counts_the_verdicts_claims_md_shows(tmp_path, monkeypatch):
    """The closing count line reads the claims as settled across figures for CLAIMS.md (a row the
    audit makes INFO is INFO in both), not the notebook's raw verdicts."""
    import dataclasses

    from sandbox.analysis.claims import ClaimBook

    def failing(source, output, env, progress=True):
        book = ClaimBook("gate", env["SANDBOX_CLAIMS"])
        book.less("dg-below-pg", "DG's error is below PG's", [0.5, 0.6, 0.7], [0.1, 0.2, 0.1])
        Path(env["SANDBOX_FIGURES"]).mkdir(parents=True, exist_ok=True)
        (Path(env["SANDBOX_FIGURES"]) / "gate.png").write_bytes(b"png")

    written = rep.write_claims_json

    def settled_as_info(*args, **kwargs):  # stands in for a cross-figure rule that settles the row as INFO
        return [dataclasses.replace(c, passed=None) for c in written(*args, **kwargs)]

    monkeypatch.setattr(rep, "execute_notebook", failing)
    monkeypatch.setattr(rep, "write_claims_json", settled_as_info)
    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f"}
    (outcome,) = rep.reproduce(["gate"], fidelity="paper", workers=1, progress=False, **dirs)
    assert [c.verdict for c in outcome.claims] == ["INFO"]
    assert "evidence: 0 PASS, 0 FAIL, 1 INFO" in rep.summary([outcome])
