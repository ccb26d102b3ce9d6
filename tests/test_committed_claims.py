"""The committed paper-tier claims pass the rules that make a row evidence (sandbox.analysis.claim_audit):
one measurement per row, verdicts independent of order, discrimination by magnitude, arms that
moved, verifiable CHECKs, confirmation of every post-hoc choice, identities as sanity, no decided
paper statement left in INFO — every row holds the class ``claim_audit.settle`` recomputes, CLAIMS.md
shows exactly the rows of claims.json, and the README and docs/figures.md show its counts."""

from __future__ import annotations

import json
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

import simulations
from sandbox.analysis import claim_audit
from sandbox.analysis.claim_counts import COUNT_PAGES, refresh_counts
from sandbox.analysis.claim_table import Claim, from_dict
from sandbox.claims_file import _cell
from simulations import claim_rules

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "paper_figures"


@pytest.fixture(scope="module")
def committed() -> list[Claim]:
    simulations.load_families()
    entries = json.loads((FIGURES / "claims.json").read_text())
    return [from_dict(e) for e in entries]


def test_every_committed_evidence_row_passes_the_audit(committed):
    violations = claim_audit.audit(committed, published=simulations.published(), **simulations.audit_rules())
    assert violations == [], "\n".join(violations)


def test_every_row_holds_the_class_the_rules_recompute(committed):
    again = claim_audit.settle(committed, simulations.published(), simulations.audit_rules()["starts"])
    changed = [f"{c.figure}/{c.name}: {c.verdict} → {d.verdict}" for c, d in zip(committed, again) if c != d]
    assert changed == [], changed


def test_the_front_page_and_the_figures_page_show_the_committed_counts():
    text = (FIGURES / "CLAIMS.md").read_text()
    for page, (link, per_figure) in COUNT_PAGES.items():
        shown = (ROOT / page).read_text()
        assert shown == refresh_counts(shown, text, link, per_figure), \
            f"{page}: its claim counts are not CLAIMS.md's: run python -m sandbox.analysis.claim_counts"
    evidence = [c for c in claim_audit.asserted_evidence(_rows()) if c.kind == "evidence"]
    readme = (ROOT / "README.md").read_text()
    assert f"{sum(c.passed is False for c in evidence)} FAIL" in readme


def _rows() -> list[Claim]:
    return [from_dict(e) for e in json.loads((FIGURES / "claims.json").read_text())]


def test_every_asserted_evidence_row_carries_its_per_seed_vector(committed):
    # a row whose estimate is NaN measured nothing (its rule's precondition failed: no collapse to precede)
    bare = [f"{c.figure}/{c.name}" for c in claim_audit.asserted_evidence(committed)
            if c.n and not c.values and c.estimate == c.estimate]
    assert bare == []  # without it the identity check could not see a repeated measurement


def test_claims_md_shows_the_rows_of_claims_json(committed):
    rows = Counter()
    for line in (FIGURES / "CLAIMS.md").read_text().splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if line.startswith("| `") and len(cells) >= 9 and cells[2] in ("evidence", "sanity"):
            rows[(cells[0].strip("| `"), cells[1], cells[2], cells[6].strip("*"))] += 1
    assert rows == Counter((c.figure, _cell(c.statement), c.kind, c.verdict) for c in committed)


def test_the_rules_name_figures_and_claims_that_exist(committed):
    names = {(c.figure, c.name) for c in committed}
    for figure, pattern in claim_rules.POSTHOC:
        assert any(f == figure and fnmatchcase(n, pattern) for f, n in names), (figure, pattern)
    for figure, rows in claim_rules.IDENTITIES.items():
        for pattern, _ in rows:
            assert any(f == figure and fnmatchcase(n, pattern) for f, n in names), (figure, pattern)
