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
