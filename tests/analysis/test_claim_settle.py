"""The strengthened claim rules (sandbox.analysis.claim_audit, claim_identity): identity by what a
row measures, verdicts independent of order, discrimination by magnitude, every label audited."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from sandbox.analysis import claim_audit
from sandbox.analysis.claim_identity import same_vectors
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.stats import Interval


def test_one_stuck_seed_of_a_shared_arm_does_not_make_two_rows_one():
    rng = np.random.default_rng(0)
    reinforce = rng.uniform(0.0, 0.02, 8)
    reinforce[5] = 0.49  # one seed stuck: it alone drives the correlation of the two differences
    kondo10, kondo30 = 0.355 + rng.normal(0, 0.005, 8), rng.uniform(0.0, 0.02, 8)
    a, b = kondo10 - reinforce, kondo30 - reinforce
    assert abs(np.corrcoef(a, b)[0, 1]) > 0.99  # the old rule merged them
    assert same_vectors(a, b) == ""
    book = ClaimBook("kondo")
    first = book.less("kondo10", "Kondo 10% below REINFORCE", kondo10, reinforce)
    second = book.less("kondo30", "Kondo 30% below REINFORCE", kondo30, reinforce)
    assert first.passed is False and second.passed is not None  # two measurements, each asserted


def test_subsets_and_transforms_of_a_rows_seeds_are_the_same_row():
    rng = np.random.default_rng(1)
    x = rng.normal(0.2, 0.1, 12)
    assert "subset of its seeds" in same_vectors(x[3:10], x)
    assert "negated" in same_vectors(-x[:6], x)
    assert "one line apart" in same_vectors(3 * x - 1, x)  # an affine map: a shift by a threshold, a scale
    assert "same order" in same_vectors(np.exp(5 * x), x)  # a monotone map: a log ratio beside a difference
    assert same_vectors(x[:2], x) == ""  # two values identify nothing
    assert same_vectors(rng.normal(size=12), x) == ""


def test_rows_of_one_constant_are_one_measurement_unless_they_measured_nothing():
    # all-frictions: DG solves the grid's top H = 10 in every seed and PMPO none, so DG − PMPO is
    # DG's longest H; two constants that differ, or a constant beside a varying vector, are apart
    assert "one number" in same_vectors(np.full(8, 10.0), np.full(8, 10.0))
    assert "one number" in same_vectors(np.zeros(8), np.zeros(8))
    assert same_vectors(np.full(8, 10.0), np.full(8, 4.0)) == ""
    assert same_vectors(np.full(8, 10.0), np.full(7, 10.0)) == ""
    assert same_vectors(np.full(8, 10.0), np.r_[np.full(7, 10.0), 8.0]) == ""
    assert same_vectors(np.full(8, 10.0), np.full(8, 10.0), constants=False) == ""
    book = ClaimBook("all-frictions")
    longer = book.greater("longer", "DG solves longer than PMPO", np.full(8, 10.0), np.zeros(8), test="sign-flip")
    again = book.above("top", "DG solves H = 10 in every seed", np.full(8, 10.0), 0.0, test="sign-flip")
    assert longer.passed and again.passed is None and "one measurement with longer" in again.detail
    # a contrast in which neither arm had an event measured nothing (its estimate is NaN): never one row
    nothing = [dataclasses.replace(longer, name=f"case-{i}", estimate=float("nan"), values=(400.0,) * 16)
               for i in range(2)]
    assert claim_audit.same_measurement(*nothing) == ""


def test_a_reported_row_names_the_asserted_row_that_counts_its_measurement():
    rng = np.random.default_rng(5)
    dg, pmpo = rng.uniform(0.0, 0.1, 8), np.full(8, 0.0)
    book = ClaimBook("all-frictions")
    longer = book.greater("longer", "DG's H above PMPO's", 10 * dg + 4, pmpo, test="sign-flip")
    alone = book.measure("h-dg", "DG's H", 10 * dg + 4, worse="low")
    assert longer.passed and alone.passed is None and "one measurement with" not in alone.detail
    settled = claim_audit.settle(book.claims)
    assert settled[1].detail.startswith("one measurement with all-frictions/longer, counted there (")
    assert claim_audit.settle(settled) == settled  # once: settling again changes nothing


def test_one_arm_of_an_unpaired_comparison_is_another_hypothesis():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.1, 0.05, 10), rng.normal(0.5, 0.05, 10)
    book = ClaimBook("fig")
    unpaired = book.less("a-below-b", "a below b (unpaired)", a, b, paired=False)
    alone = book.below("a-below-half", "a below 0.5", a, 0.5)
    assert unpaired.passed and alone.passed
    fewer = book.less("a-below-b-fewer", "a below b on 7 seeds", a[:7], b[:7], paired=False)
    assert fewer.passed is None and "one measurement with a-below-b" in fewer.detail


def _twins(order):
    """Two rows on one measurement — 'DG is below PMPO' (PASS) and 'DG is 10x below' (FAIL) — stated in ``order``."""
    rng = np.random.default_rng(3)
    dg, pmpo = rng.uniform(0.2, 0.3, 8), rng.uniform(0.3, 0.4, 8)
    book = ClaimBook("frictions")
    calls = {"below": lambda: book.less("below", "DG below PMPO", dg, pmpo, test="sign-flip"),
             "ten-x": lambda: book.above("ten-x", "PMPO's error exceeds DG's by 1", pmpo - dg, 1.0, test="sign-flip")}
    for name in order:
        calls[name]()
    return {c.name: c.verdict for c in book.claims}


def test_a_fail_never_becomes_info_by_reordering():
    first, second = _twins(["below", "ten-x"]), _twins(["ten-x", "below"])
    assert first == second == {"below": "INFO", "ten-x": "FAIL"}


def test_an_equivalence_needs_a_gap_wider_than_its_band():
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.93, 0.01, 10), rng.normal(0.93, 0.01, 10)
    far, near = rng.normal(0.70, 0.02, 20), rng.normal(0.875, 0.03, 20)
    kw = dict(band=0.1, worse="low", trivial=0.5, margin=0.1)
    book = ClaimBook("reference-match")
    shown = book.equivalent("matches-far", "a equals b", a, b, other=far, **kw)
    assert shown.passed and shown.gap[1] > 0.1 and claim_audit.audit([shown]) == []
    for k in (2, 3, 13):  # a noisier comparison arm fails the TOST, but shows no gap wider than the band
        noisy = ClaimBook("reference-match").equivalent("matches-near", "a equals b", a, b, other=near[:k], **kw)
        assert noisy.passed is None and "not wholly outside the band" in noisy.detail
    forged = dataclasses.replace(shown, gap=(-0.05, -0.12, 0.02))
    assert "not wholly outside its band" in claim_audit.discrimination_violations([forged])[0]


def test_a_difference_passes_only_if_its_favoured_arm_moved_from_the_start():
    rng = np.random.default_rng(5)
    starts = {("actor-bug-map", "dg-below-*"): (0.5, 0.1, "the error of a fixed answer")}
    book = ClaimBook("actor-bug-map")
    chance = book.less("dg-below-chance", "DG below PG", 0.50 + rng.normal(0, 0.003, 8),
                       0.51 + rng.normal(0, 0.003, 8) + 0.005)
    learned = book.less("dg-below-learned", "DG below PG", rng.uniform(0.0, 0.05, 8), 0.5 + rng.normal(0, 0.01, 8))
    assert chance.passed and learned.passed  # DG learned, PG stayed at chance: a method at work
    assert [v.split(":")[0] for v in claim_audit.movement_violations(book.claims, starts)] == ["actor-bug-map/dg-below-chance"]
    settled = claim_audit.settle(book.claims, starts=starts)
    assert [c.verdict for c in settled] == ["INFO", "PASS"] and "did not move" in settled[0].detail
    assert claim_audit.audit(settled, starts=starts) == []
    failing = dataclasses.replace(chance, passed=False)  # a FAIL between arms at chance stays a FAIL
    assert claim_audit.settle([failing], starts=starts)[0].passed is False


def test_every_label_is_audited():
    book = ClaimBook("fig")
    close = book.close("identity", "x equals y", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-13]), 1e-12)
    exact = book.exact("closed-form", "a closed form", 0.25, True)
    stat = book.holds("bootstrap", "a Monte Carlo ratio contains the closed form", Interval(0.5, 0.48, 0.52), True,
                      "bootstrap of the ratio of means", kind="sanity", n=0)
    assert (close.verdict, exact.verdict, stat.verdict) == ("CHECK", "CHECK", "INFO")
    assert "no stated tolerance" in stat.detail
    forged = dataclasses.replace(close, high=1e-6)
    assert "exceeds its stated tolerance" in claim_audit.sanity_violations([forged])[0]
    # a reported row whose interval decides a paper's statement is asserted, PASS or FAIL
    rng = np.random.default_rng(6)
    info = book.report(book.less("dg-below", "DG below PG", rng.uniform(0, 0.1, 8), rng.uniform(0.3, 0.4, 8)))
    published = {("fig", "dg-below"): "P2: DG beats PG"}
    assert "supports the paper's statement" in claim_audit.published_violations([info], published)[0]
    (asserted,) = claim_audit.settle([info], published)
    assert asserted.verdict == "PASS" and claim_audit.audit([asserted], published=published) == []


def test_settle_does_not_depend_on_the_order_of_the_rows():
    rng = np.random.default_rng(7)
    starts = {("fig", "*"): (0.5, 0.1, "chance")}
    book = ClaimBook("fig")
    book.less("moved", "s", rng.uniform(0, 0.1, 8), rng.uniform(0.2, 0.3, 8))
    book.less("chance", "s", 0.5 + rng.normal(0, 0.002, 8), 0.52 + rng.normal(0, 0.002, 8))
    book.report(book.greater("decides", "s", rng.uniform(0.3, 0.4, 8), rng.uniform(0, 0.1, 8)))
    published = {("fig", "decides"): "a paper's statement"}
    verdicts = {tuple(sorted((c.name, c.verdict) for c in claim_audit.settle(rows, published, starts)))
                for rows in itertools.permutations(book.claims)}
    assert len(verdicts) == 1
    (once,) = verdicts
    assert once == (("chance", "INFO"), ("decides", "PASS"), ("moved", "PASS"))
    settled = claim_audit.settle(book.claims, published, starts)
    assert claim_audit.settle(settled, published, starts) == settled  # idempotent


def test_a_reported_row_that_an_asserted_row_already_states_is_folded_into_it(tmp_path):
    # all-frictions at paper fidelity: DG's and PPO's longest H are 10 in every seed and PMPO's 0, so
    # "DG solves longer than PMPO" (10 − 0) already states DG's and PPO's 10: one measurement, one row
    from sandbox.analysis.claims import load_claims

    book = ClaimBook("all-frictions", tmp_path / "claims.json")
    longer = book.greater("longer", "DG solves longer than PMPO", np.full(8, 10.0), np.zeros(8), test="sign-flip")
    row = book.fold(book.measure("h-dg", "DG's longest H", np.full(8, 10.0), worse="low", statistic="median"))
    row = book.fold(book.measure("h-ppo", "PPO's longest H", np.full(8, 10.0), worse="low", statistic="median"))
    assert [c.name for c in book.claims] == ["longer"] and row.passed and row.interval == longer.interval == "10"
    assert [f.name for f in claim_audit.folded(row)] == ["h-dg", "h-ppo"]
    assert [f.interval for f in claim_audit.folded(row)] == ["10", "10"]
    assert load_claims(tmp_path / "claims.json") == book.claims  # the folds survive the file
    assert claim_audit.audit(book.claims) == [] and claim_audit.settle(book.claims) == book.claims
    # another number stays a row of its own, as does one measurement printed as another number
    pmpo = book.fold(book.measure("h-pmpo", "PMPO's longest H", np.zeros(8), worse="low", statistic="median"))
    rng = np.random.default_rng(8)
    h = np.round(rng.uniform(4, 10, 8))
    book.greater("longer-than-none", "PG solves longer than a method that solves none", h, np.zeros(8), test="sign-flip")
    median = book.fold(book.measure("h-pg", "PG's longest H", h, worse="low", statistic="median"))
    assert pmpo.name == "h-pmpo" and median.name == "h-pg"
    assert [c.name for c in book.claims] == ["longer", "h-pmpo", "longer-than-none", "h-pg"]
    with pytest.raises(ValueError, match="reported evidence row"):
        book.fold(book.claims[0])
    # the audit refuses a fold of another measurement, or of another number
    other = dataclasses.replace(row, also=(("h-x", "x", 0.0, 0.0, 0.0, (0.0,) * 8),))
    assert "not one measurement" in claim_audit.fold_violations([other])[0]
    shifted = dataclasses.replace(row, also=(("h-x", "x", 10.0, 9.0, 10.0, (10.0,) * 8),))
    assert "another number" in claim_audit.fold_violations([shifted])[0]
