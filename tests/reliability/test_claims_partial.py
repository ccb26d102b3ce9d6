"""A partial ``sandbox reproduce NAME --fidelity paper`` updates its figures' rows of CLAIMS.md and
keeps every other figure's rows; the totals are counted over the whole new file (issue 36: a
reproduce of gate into a fresh results folder left "0 PASS, 0 FAIL, 0 INFO" for the other 17)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.claims_file import Previous, _cells, write_claims_file

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "paper_figures" / "CLAIMS.md"


def _totals(text: str) -> tuple[str, str]:
    return re.search(r"\*\*Evidence:\*\* [^\n]*", text).group(0), re.search(r"Compute: [\d.]+ \w+ of job time", text).group(0)


def _recount(text: str) -> dict:
    counts: dict = {}
    for rows in Previous.read_text(text).claim_rows.values():
        for row in rows:
            key = (_cells(row)[2], _cells(row)[6].strip("*"))
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_a_partial_reproduce_updates_its_rows_and_keeps_the_others(tmp_path):
    figures_dir = tmp_path / "paper_figures"
    figures_dir.mkdir()
    shutil.copy(COMMITTED, figures_dir / "CLAIMS.md")
    before = Previous.read(figures_dir / "CLAIMS.md")
    names = list(before.figure_rows)
    assert len(names) >= 18 and "gate" in names
    results = tmp_path / "results"  # a fresh folder: only gate was run into it
    book = ClaimBook("gate", results / "claims" / "gate.paper.json")
    book.close("odd", "PG's weight is odd in A", 0.0, 0.0, 1e-12)
    book.less("new-evidence", "a new claim of gate", np.array([0.1, 0.2, 0.1]), np.array([0.5, 0.6, 0.7]))
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "gate.paper.json").write_text(json.dumps(
        {"note": "gate, again", "jobs": 1, "job_seconds": {"g": 1.0}, "notebook_seconds": 12, "commit": "1234abc"}))
    write_claims_file(figures_dir / "CLAIMS.md", [SimpleNamespace(name=n) for n in names], "paper", results,
                      data_dir=ROOT / "paper_figures" / "data", command="sandbox reproduce --fidelity paper",
                      headlines="")
    text = (figures_dir / "CLAIMS.md").read_text()
    after = Previous.read(figures_dir / "CLAIMS.md")
    assert list(after.figure_rows) == names
    for name in names:
        if name == "gate":
            assert "gate, again" in after.figure_rows[name] and len(after.claim_rows[name]) == 2
            continue
        assert after.figure_rows[name] == before.figure_rows[name], name  # kept, to the byte
        assert after.claim_rows.get(name) == before.claim_rows.get(name), name
    assert text.count("not run yet") == COMMITTED.read_text().count("not run yet")  # a figure kept as it was
    old = _recount(COMMITTED.read_text())
    new = _recount(text)
    assert new[("evidence", "PASS")] == old[("evidence", "PASS")] + 1  # gate's new claim, counted with the kept
    evidence, compute = _totals(text)
    assert evidence.startswith(f"**Evidence:** {new[('evidence', 'PASS')]} PASS, {new[('evidence', 'FAIL')]} FAIL, "
                               f"{new[('evidence', 'INFO')]} INFO")
    assert compute == _totals(COMMITTED.read_text())[1]  # the kept figures' job time from their data files


def test_a_figure_this_invocation_ran_without_a_record_is_not_kept_from_the_old_file(tmp_path):
    """A figure that was run and left no record, with no failure reported, says so; only figures not
    run, or whose notebook failed (below), keep their rows."""
    shutil.copy(COMMITTED, tmp_path / "CLAIMS.md")
    names = list(Previous.read(tmp_path / "CLAIMS.md").figure_rows)
    write_claims_file(tmp_path / "CLAIMS.md", [SimpleNamespace(name=n) for n in names], "paper", tmp_path / "results",
                      ran={"gate"}, headlines="")
    text = (tmp_path / "CLAIMS.md").read_text()
    assert "| `gate` | not run yet at paper fidelity |" in text
    assert Previous.read(tmp_path / "CLAIMS.md").figure_rows["kondo"] == Previous.read(COMMITTED).figure_rows["kondo"]


def test_r2_a_figure_whose_notebook_fails_keeps_its_last_good_rows_marked(tmp_path, monkeypatch):
    """R2 (issue 46): a reproduce whose notebook failed ("Index contains duplicate entries") deleted
    the figure's committed rows from CLAIMS.md (its row read "not run yet") and its claims.json
    entries. Now they stay, the figure row marked with the error, and the totals still count them."""
    import sandbox.reproduce as rep
    from sandbox.claims_file import LAST_GOOD
    from sandbox.jobs.sweep import Job

    def toy(name):
        source = tmp_path / f"{name}.py"
        source.write_text("# %%\n1\n")
        jobs = [Job("tests.reliability.jobs:tick", {"x": len(name)})]  # the per-seed data a paper run exports
        return SimpleNamespace(name=name, jobs=lambda fidelity: jobs, notebook_path=lambda: source)

    figures = [toy("alpha"), toy("beta")]
    registry = SimpleNamespace(FIDELITIES=("quick", "paper"),
                               select=lambda names=None: [f for f in figures if names is None or f.name in names])
    broken: set[str] = set()

    def notebook(source, output, env, progress=True):
        if source.stem in broken:
            raise ValueError("Index contains duplicate entries, cannot reshape")
        book = ClaimBook(source.stem, env["SANDBOX_CLAIMS"])
        book.less(f"{source.stem}-less", f"{source.stem}: a below b", np.array([0.1, 0.2, 0.1]), np.array([0.5, 0.6, 0.7]))
        book.close(f"{source.stem}-odd", f"{source.stem}: an identity", 0.0, 0.0, 1e-12)

    monkeypatch.setattr(rep, "figures", lambda: registry)
    monkeypatch.setattr(rep, "execute_notebook", notebook)
    figures_dir = tmp_path / "paper_figures"
    rep.reproduce(fidelity="paper", results_dir=tmp_path / "r1", figures_dir=figures_dir, workers=1, progress=False)
    good = (figures_dir / "CLAIMS.md").read_text()
    good_json = json.loads((figures_dir / "claims.json").read_text())
    assert len(Previous.read_text(good).claim_rows["alpha"]) == 2 and "not run yet" not in good
    broken.add("alpha")
    for results, names in ((tmp_path / "r2", None), (tmp_path / "r1", ["alpha"])):  # a fresh folder; the same, rerun
        outcomes = rep.reproduce(names, fidelity="paper", results_dir=results, figures_dir=figures_dir, workers=1,
                                 progress=False, rerun=True)
        assert [o.error for o in outcomes if o.name == "alpha"] == ["ValueError: Index contains duplicate entries, "
                                                                     "cannot reshape"]
        text = (figures_dir / "CLAIMS.md").read_text()
        before, after = Previous.read_text(good), Previous.read_text(text)
        assert after.claim_rows["alpha"] == before.claim_rows["alpha"] and "not run yet" not in text
        row = _cells(after.figure_rows["alpha"])
        assert row[1].endswith(f"{LAST_GOOD}ValueError: Index contains duplicate entries, cannot reshape)"), row
        assert row[2:] == _cells(before.figure_rows["alpha"])[2:] and row[1].count(LAST_GOOD) == 1
        assert _totals(text)[0] == _totals(good)[0]  # the kept rows counted
        entries = json.loads((figures_dir / "claims.json").read_text())
        assert [e for e in entries if e["figure"] == "alpha"] == [e for e in good_json if e["figure"] == "alpha"]
    broken.clear()  # the next good run replaces the marked rows
    rep.reproduce(["alpha"], fidelity="paper", results_dir=tmp_path / "r1", figures_dir=figures_dir, workers=1,
                  progress=False, rerun=True)
    assert LAST_GOOD not in (figures_dir / "CLAIMS.md").read_text()


def test_a_failed_figure_without_earlier_rows_names_its_failure():
    from sandbox.claims_file import LAST_GOOD, claims_markdown

    text = claims_markdown([SimpleNamespace(name="gamma")], "paper", "/nonexistent", failed={"gamma": "KeyError: 'x'"})
    assert f"| `gamma` | {LAST_GOOD}KeyError: 'x') no earlier rows |" in text


def test_a_kept_headline_row_that_names_a_claim_in_backticks_is_kept():
    # the VCPO row names async-signatures and early-warning, and the claim `stale-ess-drops`: a
    # reproduce of all-frictions alone keeps it, not "not run yet" for both figures
    from sandbox.claims_file import _merge_headlines

    head = "| paper | quantity | method | published | reading | sandbox | why |\n|---|---|---|---|---|---|---|\n"
    previous = Previous.read_text("## Published numbers beside ours\n\n" + head
                                  + "| VCPO | claim | PG | x | – | `early-warning`: 0.5 (8 seeds) | not `stale-ess-drops` |\n"
                                  + "| P2 | H* | DG | x | – | `all-frictions`: 9 (8 seeds) | – |\n")
    new = (head + "| VCPO | claim | PG | x | – | `early-warning`: not run yet at paper fidelity | not `stale-ess-drops` |\n"
           + "| P2 | H* | DG | x | – | `all-frictions`: 10 (8 seeds) | – |")
    merged = _merge_headlines(new, previous, {"early-warning"}, {"early-warning", "all-frictions"})
    assert "`early-warning`: 0.5 (8 seeds)" in merged and "`all-frictions`: 10 (8 seeds)" in merged
    assert "not run yet" in _merge_headlines(new, previous, {"early-warning"})  # names unknown: the claim counts
    # a row of a figure run here and one kept: the kept figure's part as it was, the other's new
    previous = Previous.read_text("## Published numbers beside ours\n\n" + head + "| GAC | claim | GAC | x | – | "
                                  "`async-signatures`: a 1 (30 seeds); b 2 (30 seeds); `frictions`: c 3 (8 seeds) | – |\n")
    new = head + ("| GAC | claim | GAC | x | – | `async-signatures`: a 1.5 (30 seeds); b 2 (30 seeds); `frictions`: not run "
                  "yet at paper fidelity | – |")
    merged = _merge_headlines(new, previous, {"frictions"}, {"async-signatures", "frictions"})
    assert merged.splitlines()[-1] == ("| GAC | claim | GAC | x | – | `async-signatures`: a 1.5 (30 seeds); b 2 (30 seeds); "
                                       "`frictions`: c 3 (8 seeds) | – |")
