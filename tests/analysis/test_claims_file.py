"""paper_figures/CLAIMS.md: rebuilt from stored claims and records, with the papers' statements."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.stats import Interval
from sandbox.claims_file import claims_markdown


def test_claims_md_lists_every_figure_claim_verdict_seeds_and_published_statement(tmp_path):
    results = tmp_path / "results"
    book = ClaimBook("fig-a", results / "claims" / "fig-a.paper.json")
    book.less("dg-below-pg", "DG's error is below PG's", np.array([0.1, 0.2, 0.1]), np.array([0.5, 0.6, 0.7]))
    book.report(book.less("dg-below-ppo", "DG's error is below PPO's", np.array([0.1, 0.2, 0.1]),
                          np.array([0.1, 0.3, 0.0])))
    book.close("identity", "an identity", 1.0, 1.0, 1e-9)
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "fig-c.paper.json").write_text(json.dumps(  # shares job j2 with fig-a
        {"note": "c", "jobs": 1, "job_seconds": {"j2": 3600.0}, "notebook_seconds": 0, "commit": "abc1234"}))
    (results / "notebooks" / "fig-a.paper.json").write_text(json.dumps(
        {"note": "fidelity=paper, 3 seeds, 100 steps", "jobs": 4, "job_seconds": {"j1": 3600.0, "j2": 3600.0}, "notebook_seconds": 30,
         "commit": "abc1234", "finished": "2026-11-23 03:00 UTC"}))
    figures = [SimpleNamespace(name="fig-a"), SimpleNamespace(name="fig-b"), SimpleNamespace(name="fig-c")]
    text = claims_markdown(figures, "paper", results, published={("fig-a", "dg-below-p*"): "P1: DG wins"},
                           command="sandbox reproduce --fidelity paper --workers 2", workers=2, last_run=(3, 90.0),
                           headlines="| paper | quantity |\n|---|---|\n| P2 | error |")
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| `fig-a` |")}
    assert "2.00 h" in rows["fidelity=paper, 3 seeds, 100 steps"] and "`abc1234`" in rows["fidelity=paper, 3 seeds, 100 steps"]
    assert "**PASS**" in rows["DG's error is below PG's"] and rows["DG's error is below PG's"].endswith("| P1: DG wins |")
    assert "**INFO**" in rows["DG's error is below PPO's"] and "P1: DG wins" in rows["DG's error is below PPO's"]
    assert "**CHECK**" in rows["an identity"] and rows["an identity"].endswith("|  |")  # no published statement
    assert "| `fig-b` | not run yet at paper fidelity |" in text
    assert "**Evidence:** 1 PASS, 0 FAIL, 1 INFO" in text and "1 CHECK, 0 FAIL, 0 INFO" in text  # counted apart
    assert "2.00 h of job time" in text  # j2, shared by fig-a and fig-c, counts once
    assert "about 1.01 h of wall time" in text  # 2 h of jobs on 2 workers + 30 s of notebook
    assert "ran 3 figures in 1.5 min of wall time" in text
    assert "## Published numbers beside ours\n\n| paper | quantity |" in text


def test_the_headline_table_sets_each_measured_number_beside_the_papers_row(tmp_path):
    import pandas as pd

    from simulations.paper_statements import DATA, HEADLINES, headline_markdown

    book = ClaimBook("mnist-staleness", tmp_path / "claims" / "mnist-staleness.paper.json")
    book.measure("error-at-D1000-dg", "DG's final error at D = 1000", [0.02, 0.04, 0.03], worse="high")
    book.measure("error-at-D1000-is-pg", "IS-PG's", [0.08, np.nan, 0.10], worse="high")  # a diverged seed
    rows = {(r.split("|")[1].strip(), r.split("|")[2].strip(), r.split("|")[3].strip()): r
            for r in headline_markdown(tmp_path, "paper").splitlines()[2:]}
    assert len(rows) == len({row for _, _, row, _, _ in HEADLINES})  # one line per published row
    dg = rows[("P2", "MNIST classification error at delay D = 1,000", "DG")]
    assert "`mnist-staleness`: 0.03 [0.005159, 0.05484] (3 seeds)" in dg and "~2%" in dg  # 0.03 ± 4.303·0.01/√3
    assert "0.1 [0.1, 0.1] (3 seeds)" not in rows[("P2", "MNIST classification error at delay D = 1,000",
                                                   "IS-PG (exact importance weights)")]  # NaN → 0.10, the worst
    assert "not run yet at paper fidelity" in rows[("P2", "MNIST classification error at delay D = 1,000", "REINFORCE")]
    table = pd.read_csv(DATA)
    for figure, pattern, row, _, _ in HEADLINES:  # a measured number sits beside its own method's row
        measured = re.fullmatch(r"(?:(?:seq-)?error-at-[^-]+|longest-H)-(.+)", pattern or "")
        if measured:
            method = measured.group(1).upper()
            assert table.loc[row, "method"].startswith(method) or f"({method})" in table.loc[row, "method"], (figure, row)
        else:
            assert table.loc[row, "kind"] == "text", (figure, pattern, row)  # a qualitative statement


def test_a_fail_says_why_and_a_figure_links_its_data(tmp_path):
    from sandbox.claims_file import NO_CAUSE

    results = tmp_path / "results"
    book = ClaimBook("fig-a", results / "claims" / "fig-a.paper.json")
    book.less("dg-below-pg", "DG below PG", np.array([0.5, 0.6, 0.7]), np.array([0.1, 0.2, 0.1]))  # fails
    book.less("dg-below-pmpo", "DG below PMPO", np.array([0.5, 0.6, 0.7]), np.array([0.2, 0.3, 0.2]))  # fails
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "fig-a.paper.json").write_text(json.dumps({"note": "n", "jobs": 1, "job_seconds": {}}))
    data = tmp_path / "figures" / "data"
    data.mkdir(parents=True)
    (data / "fig-a.parquet").write_bytes(b"")
    text = claims_markdown([SimpleNamespace(name="fig-a")], "paper", results, data_dir=data,
                           causes={("fig-a", "dg-below-pg"): "the reference code fails it too (reference behaviour)"})
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| `fig-a` |")}
    assert "the reference code fails it too" in rows["DG below PG"] and NO_CAUSE in rows["DG below PMPO"]
    assert "[data](data/fig-a.parquet)" in text
    # a claim whose test states its own cause (declared code, as published-outcomes' cases) shows it
    book.holds("case-1", "A collapses, B does not", Interval(1.0, 0.0, 2.0, n=8), False,
               "verdict disagree; 0/8 vs 0/8; cause: no seed collapsed at this scale")
    text = claims_markdown([SimpleNamespace(name="fig-a")], "paper", results, data_dir=data,
                           causes={("fig-a", "dg-below-pg"): "the reference code fails it too (reference behaviour)"})
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| `fig-a` |")}
    assert "| no seed collapsed at this scale |" in rows["A collapses, B does not"]
    assert NO_CAUSE in rows["DG below PMPO"]


def test_a_folded_row_keeps_its_paper_statements_in_claims_md_and_the_headline_table(tmp_path):
    from simulations.paper_statements import headline_markdown

    results = tmp_path / "results"
    book = ClaimBook("all-frictions", results / "claims" / "all-frictions.paper.json")
    book.greater("dg-longer-than-pmpo", "DG solves longer than PMPO", np.full(8, 10.0), np.zeros(8), test="sign-flip")
    book.fold(book.measure("longest-H-dg", "the longest H DG solves", np.full(8, 10.0), worse="low", statistic="median"))
    assert [c.name for c in book.claims] == ["dg-longer-than-pmpo"]
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "all-frictions.paper.json").write_text(json.dumps({"note": "n", "jobs": 1, "job_seconds": {}}))
    text = claims_markdown([SimpleNamespace(name="all-frictions")], "paper", results,
                           published={("all-frictions", "dg-*"): "P2: longer", ("all-frictions", "longest-H-*"): "P2: H*"})
    (row,) = [line for line in text.splitlines() if line.startswith("| `all-frictions` | DG solves")]
    assert "one row for one measurement, which also states: the longest H DG solves (`longest-H-dg`)" in row
    assert row.endswith("| P2: longer; P2: H* |") and "**PASS**" in row
    dg = [line for line in headline_markdown(results, "paper").splitlines() if "| longest prompt length" in line
          and "| DG |" in line]
    assert len(dg) == 1 and "`all-frictions`: 10 (8 seeds) |" in dg[0]  # found by its name, without the PASS
