"""Red team: rows that game the claim audit, built on a scratch copy of the committed
``paper_figures/claims.json`` — a row restated on a subset of its seeds, a Cauchy–Schwarz bound
under a new name, a TOST made to "discriminate" by a noisier comparison arm, two arms at chance, a
post-hoc window re-asserted on its selection seeds, a FAIL turned into INFO by stating its PASS
twin first, and a censored constant (every seed at the grid's top) asserted again under a new name. Each must be refused by ``claim_audit.audit`` with the paper tier's rules."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import simulations
from sandbox.analysis import claim_audit
from sandbox.analysis.claim_table import Claim
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.exact_tests import equivalence_interval
from sandbox.analysis.stats import interval

ROOT = Path(__file__).resolve().parents[2]


def _claim(entry: dict) -> Claim:
    fields = Claim.__dataclass_fields__
    return Claim(**{k: (tuple(map(tuple, v)) if k == "arms" else tuple(v)) if isinstance(v, list) else v
                    for k, v in entry.items() if k in fields})


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> list[dict]:
    """The committed claims, read from a scratch copy (the committed file is never written)."""
    path = tmp_path_factory.mktemp("red-team") / "claims.json"
    shutil.copy(ROOT / "paper_figures" / "claims.json", path)
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def rules() -> dict:
    simulations.load_families()
    return {"published": simulations.published(), **simulations.audit_rules()}


def _row(entries: list[dict], figure: str, name: str) -> Claim:
    return _claim(next(e for e in entries if e["figure"] == figure and e["name"] == name))


def _refused(entries: list[dict], rules: dict, forged: list[Claim], drop: tuple[str, ...] = ()) -> list[str]:
    """The violations that ``forged`` rows (added, or replacing the rows of their names) bring."""
    claims = [_claim(e) for e in entries]
    before = set(claim_audit.audit(claims, **rules))
    names = {(c.figure, c.name) for c in forged} | {(forged[0].figure, d) for d in drop}
    gamed = [c for c in claims if (c.figure, c.name) not in names] + forged
    return [v for v in claim_audit.audit(gamed, **rules) if v not in before]


def _threshold_row(base: Claim, name: str, values: np.ndarray, threshold: float, side: str) -> Claim:
    iv = interval(values, "mean")
    passed = iv.high < threshold if side == "below" else iv.low > threshold
    assert passed, "the forged row must PASS its own test"
    return dataclasses.replace(base, name=name, estimate=iv.estimate, low=iv.low, high=iv.high, passed=True, n=values.size,
                               values=tuple(values), side=side, against=threshold, test="threshold", kind="evidence",
                               detail=f"mean {'<' if side == 'below' else '>'} {threshold:g} over {values.size} seeds (t)",
                               choice="", checks="")


def test_a_row_restated_on_a_subset_of_its_seeds_is_refused(scratch, rules):
    base = _row(scratch, "async-signatures", "staleness-hurts")
    subset = np.asarray(base.values[:12])
    forged = _threshold_row(base, "staleness-hurts-first-12", subset, 0.0, "above")
    refused = _refused(scratch, rules, [forged])
    assert any("staleness-hurts-first-12" in v and "subset of its seeds" in v for v in refused), refused


def test_a_cauchy_schwarz_bound_under_a_new_name_is_refused(scratch, rules):
    drops = _row(scratch, "async-signatures", "stale-ess-drops")  # ESS/B − 1 (sync is exactly 1)
    forged = _threshold_row(drops, "stale-ess-below-one", np.asarray(drops.values) + 1.0, 1.0, "below")
    refused = _refused(scratch, rules, [forged])
    assert any("stale-ess-below-one restates async-signatures/stale-ess-drops" in v for v in refused), refused


@pytest.mark.parametrize("k", [2, 3, 11, 12, 13])
def test_a_tost_made_to_discriminate_by_a_noisier_arm_is_refused(scratch, rules, k):
    dg = _row(scratch, "reference-match", "dg-rare-discovery-matches-reference")
    pg = _row(scratch, "reference-match", "pg-rare-discovery-matches-reference")
    sandbox_dg = np.asarray(dg.values[:10])
    reference_pg = np.asarray(pg.values[len(pg.values) // 2:])[:k]  # the first k seeds of the reference's PG
    iv = equivalence_interval(sandbox_dg, reference_pg, False, 0.05)
    assert not (-0.1 < iv.low and iv.high < 0.1), "with k seeds the TOST against PG fails: it 'discriminates'"
    checks = "; ".join(part for part in dg.checks.split("; ") if part.startswith("informative:"))
    forged = dataclasses.replace(dg, passed=True, detail=dg.detail.split("): ", 1)[-1], checks=(
        f"{checks}; discriminates: the same test against the reference's PG (its first {k} seeds) gives "
        f"{iv.estimate:.4g} [{iv.low:.4g}, {iv.high:.4g}], outside the band"))
    refused = _refused(scratch, rules, [forged])
    assert any("dg-rare-discovery-matches-reference" in v and "band" in v for v in refused), refused


def test_a_difference_between_two_arms_at_chance_is_refused(scratch, rules):
    rng = np.random.default_rng(44)
    dg = 0.50 + rng.normal(0, 0.005, 8)
    pg = dg + 0.01 + rng.uniform(0.001, 0.004, 8)  # PG 0.51: both at the error of a fixed answer
    forged = ClaimBook("actor-bug-map").less("dg-below-pg-at-chance", "DG's final error is below PG's (paired)",
                                             dg, pg, test="sign-flip", worse="high")
    assert forged.passed
    refused = _refused(scratch, rules, [forged])
    assert any("dg-below-pg-at-chance" in v and "move" in v for v in refused), refused


def test_a_post_hoc_window_re_asserted_on_its_selection_seeds_is_refused(scratch, rules):
    seen = next(_claim(e) for e in scratch if e["figure"] == "prop2-multi-context" and e["name"].endswith("-window"))
    assert seen.passed is None and seen.choice and "confirmed on" not in seen.choice
    forged = dataclasses.replace(seen, name=seen.name + "-again", passed=True, choice="",
                                 detail=seen.detail.split("): ", 1)[-1])
    refused = _refused(scratch, rules, [forged])
    assert any(f"{seen.name}-again" in v for v in refused), refused


def test_stating_the_pass_twin_first_does_not_hide_the_fail(scratch, rules):
    ten_x = _row(scratch, "frictions", "dg-ten-x-pmpo-actor-bug")
    below = _row(scratch, "frictions", "dg-below-pmpo-actor-bug-0.3")
    assert below.agreement == "supports" and ten_x.agreement != "supports"
    swapped = [dataclasses.replace(below, passed=True, detail=below.detail.split("): ", 1)[-1]),
               dataclasses.replace(ten_x, passed=None, detail="reported, not counted again: one measurement with "
                                   f"dg-below-pmpo-actor-bug-0.3: {ten_x.detail}")]
    refused = _refused(scratch, rules, swapped)
    assert any("dg-ten-x-pmpo-actor-bug" in v for v in refused), refused


def test_a_censored_constant_asserted_again_under_a_new_name_is_refused(scratch, rules):
    longer = _row(scratch, "all-frictions", "dg-longer-than-pmpo")  # DG 10 − PMPO 0 in every seed
    assert longer.passed and set(longer.values) == {10.0}
    forged = ClaimBook("all-frictions").greater("dg-solves-the-top-H", "DG solves H = 10 in every seed (vs 0)",
                                                np.asarray(longer.arms[0]), np.zeros(8), test="sign-flip")
    assert forged.passed and set(forged.values) == {10.0}
    refused = _refused(scratch, rules, [forged])
    assert any("dg-solves-the-top-H" in v and "dg-longer-than-pmpo" in v and "one number" in v for v in refused), refused
