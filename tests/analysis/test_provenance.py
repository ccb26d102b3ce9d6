"""git_commit: the commit a figure was made at, -dirty only when the code differs."""

from __future__ import annotations

import subprocess

import sandbox.analysis.provenance as provenance


def test_rewritten_paper_figures_do_not_make_a_record_dirty_but_an_edited_source_does(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "paper_figures").mkdir()
    (tmp_path / "paper_figures" / "fig.png").write_text("old")
    (tmp_path / "code.py").write_text("x = 1")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    clean = provenance.git_commit()
    assert len(clean) >= 7 and not clean.endswith("-dirty")
    (tmp_path / "paper_figures" / "fig.png").write_text("new")  # what a paper run does as it goes
    assert provenance.git_commit() == clean
    (tmp_path / "code.py").write_text("x = 2")
    assert provenance.git_commit() == clean + "-dirty"


def test_a_paper_run_into_the_repository_refuses_a_dirty_tree_unless_allowed(tmp_path, monkeypatch):
    import pytest

    from sandbox import reproduce

    monkeypatch.setattr(reproduce, "git_commit", lambda: "abc1234-dirty")
    monkeypatch.delenv("SANDBOX_ALLOW_DIRTY", raising=False)
    committed = provenance.ROOT / "paper_figures"
    with pytest.raises(ValueError, match="uncommitted changes .*--allow-dirty, allow_dirty=True, SANDBOX_ALLOW_DIRTY=1"):
        reproduce.check_clean("paper", committed, None)
    assert reproduce.check_clean("paper", committed, True) is True  # allowed: CLAIMS.md says so
    monkeypatch.setenv("SANDBOX_ALLOW_DIRTY", "1")
    assert reproduce.check_clean("paper", committed, None) is True
    assert reproduce.check_clean("paper", tmp_path, False) is False  # outside the repository: nothing committed
    assert reproduce.check_clean("quick", committed, False) is False
    monkeypatch.setattr(reproduce, "git_commit", lambda: "abc1234")
    assert reproduce.check_clean("paper", committed, False) is False


def test_claims_md_states_a_dirty_run_and_the_commit_of_recomputed_data(tmp_path):
    import json
    from types import SimpleNamespace

    import numpy as np

    from sandbox.analysis.claims import ClaimBook
    from sandbox.claims_file import DATA_MADE_AT, DIRTY_LEGEND, DIRTY_STAMP, Previous, claims_markdown

    results = tmp_path / "results"
    ClaimBook("fig", results / "claims" / "fig.paper.json").less("a", "a below b", np.array([0.1, 0.2, 0.1]),
                                                                 np.array([0.5, 0.6, 0.7]))
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "fig.paper.json").write_text(json.dumps(
        {"note": "n", "jobs": 1, "job_seconds": {"j": 1.0}, "commit": "new1234", "finished": "2026-11-28 09:00 UTC"}))
    old = Previous.read_text("## Figures\n\n| h |\n|---|\n| `fig` | n | 1 | 1 s | 1 s | `old5678-dirty` 2026-11-27 | |\n")
    kw = dict(command="sandbox reproduce --fidelity paper", previous=old, ran={"fig"})
    text = claims_markdown([SimpleNamespace(name="fig")], "paper", results, restored={"fig"}, **kw)
    assert f"`new1234` 2026-11-28 09:00 UTC; {DATA_MADE_AT} `old5678-dirty` 2026-11-27" in text
    again = Previous.read_text(text)  # recomputed once more: the data's commit stays the first one's
    text = claims_markdown([SimpleNamespace(name="fig")], "paper", results, restored={"fig"},
                           **{**kw, "previous": again})
    assert text.count(DATA_MADE_AT) == 1 and f"{DATA_MADE_AT} `old5678-dirty` 2026-11-27" in text
    assert DIRTY_STAMP not in text and text.count(DIRTY_LEGEND) == 1  # the header explains the stamp a row carries
    clean = claims_markdown([SimpleNamespace(name="fig")], "paper", results, **{**kw, "previous": None})
    assert "-dirty" not in clean  # no row carries the stamp: nothing to explain
    assert DIRTY_STAMP in claims_markdown([SimpleNamespace(name="fig")], "paper", results, allow_dirty=True, **kw)


def test_reproduce_takes_allow_dirty_on_the_command_line(monkeypatch, tmp_path):
    """``sandbox reproduce --allow-dirty`` hands allow_dirty=True to reproduce(); without it, None
    (then ``$SANDBOX_ALLOW_DIRTY`` decides)."""
    from sandbox import cli, reproduce

    seen = []
    monkeypatch.setattr(reproduce, "reproduce",
                        lambda names, **kw: seen.append((kw["allow_dirty"], kw["recompute"])) or [])
    monkeypatch.setattr(reproduce, "summary", lambda outcomes: "")
    for flag in (["--allow-dirty"], [], ["--recompute"]):
        cli.main(["reproduce", "--fidelity", "quick", "--results", str(tmp_path / "r"), "--figures",
                  str(tmp_path / "f"), *flag])
    assert seen == [(True, False), (None, False), (None, True)]


def test_recompute_runs_the_jobs_instead_of_restoring_the_committed_data(tmp_path, monkeypatch):
    """``reproduce(..., recompute=True)`` restores nothing and discards the chosen figures' stored
    results, so their jobs run at this commit; without it the committed data are restored."""
    from types import SimpleNamespace

    import pandas as pd

    from sandbox import reproduce
    from sandbox.jobs.store import ResultsStore

    store = ResultsStore(tmp_path / "r")
    for job in ("a", "b", "other"):
        store.write(job, pd.DataFrame({"x": [1.0]}))
    jobs = {"fig": [SimpleNamespace(id="a"), SimpleNamespace(id="b")]}
    restored = []
    monkeypatch.setattr(reproduce.figure_data, "restore_figures", lambda *a: restored.append(a) or {"a", "b"})
    figures = [SimpleNamespace(name="fig")]
    assert reproduce.committed_evidence(figures, jobs, store, tmp_path, "paper", 0) == {"a", "b"} and restored
    restored.clear()
    assert reproduce.committed_evidence(figures, jobs, store, tmp_path, "paper", 0, recompute=True) == set()
    assert restored == [] and store.job_ids() == ["other"]


def test_every_committed_figure_row_names_clean_commits():
    """Issue 44, item 5: the committed paper tier was made from clean trees — its claims and, where
    they were recomputed from committed data, that data (a row's commit cell names both)."""
    from sandbox.claims_file import DIRTY_STAMP, Previous

    text = (provenance.ROOT / "paper_figures" / "CLAIMS.md").read_text()
    rows = Previous.read_text(text).figure_rows
    assert len(rows) >= 21 and DIRTY_STAMP not in text
    dirty = sorted(name for name, row in rows.items() if provenance.names_dirty_commit(row))
    assert not dirty, f"made from a tree with uncommitted changes: {dirty}"
