"""paper_figures/CLAIMS.md: rebuilt from stored claims and records, with the papers' statements."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.claims_file import claims_markdown


def test_claims_md_lists_every_figure_claim_verdict_seeds_and_published_statement(tmp_path):
    results = tmp_path / "results"
    book = ClaimBook("fig-a", results / "claims" / "fig-a.paper.json")
    book.less("dg-below-pg", "DG's error is below PG's", np.array([0.1, 0.2, 0.1]), np.array([0.5, 0.6, 0.7]))
    book.report(book.less("dg-below-ppo", "DG's error is below PPO's", np.array([0.1, 0.2, 0.1]),
                          np.array([0.1, 0.3, 0.0])))
    book.close("identity", "an identity", 1.0, 1.0, 1e-9, kind="sanity")
    (results / "notebooks").mkdir(parents=True)
    (results / "notebooks" / "fig-c.paper.json").write_text(json.dumps(  # shares job j2 with fig-a
        {"note": "c", "jobs": 1, "job_seconds": {"j2": 3600.0}, "notebook_seconds": 0, "commit": "abc1234"}))
    (results / "notebooks" / "fig-a.paper.json").write_text(json.dumps(
        {"note": "fidelity=paper, 3 seeds, 100 steps", "jobs": 4, "job_seconds": {"j1": 3600.0, "j2": 3600.0}, "notebook_seconds": 30,
         "commit": "abc1234", "finished": "2026-11-23 03:00 UTC"}))
    figures = [SimpleNamespace(name="fig-a"), SimpleNamespace(name="fig-b"), SimpleNamespace(name="fig-c")]
    text = claims_markdown(figures, "paper", results, published={("fig-a", "dg-below-p*"): "P1: DG wins"},
                           command="sandbox reproduce --fidelity paper --workers 2", workers=2, last_run=(3, 90.0))
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| `fig-a` |")}
    assert "2.00 h" in rows["fidelity=paper, 3 seeds, 100 steps"] and "`abc1234`" in rows["fidelity=paper, 3 seeds, 100 steps"]
    assert "**PASS**" in rows["DG's error is below PG's"] and rows["DG's error is below PG's"].endswith("| P1: DG wins |")
    assert "**INFO**" in rows["DG's error is below PPO's"] and "P1: DG wins" in rows["DG's error is below PPO's"]
    assert "**CHECK**" in rows["an identity"] and rows["an identity"].endswith("|  |")  # no published statement
    assert "| `fig-b` | not run yet at paper fidelity |" in text
    assert "1 PASS, 1 CHECK (sanity checks that passed), 0 FAIL, 1 INFO" in text
    assert "2.00 h of job time" in text  # j2, shared by fig-a and fig-c, counts once
    assert "about 1.01 h of wall time" in text  # 2 h of jobs on 2 workers + 30 s of notebook
    assert "ran 3 figures in 1.5 min of wall time" in text
