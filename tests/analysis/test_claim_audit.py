"""The checks that make an asserted claim evidence (sandbox.analysis.claim_audit): one measurement
is one row, a post-hoc choice is confirmed on other seeds, an identity's consequence is sanity."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sandbox.analysis import claim_audit
from sandbox.analysis.claims import Choice, ClaimBook


def test_two_rows_on_one_measurement_are_refused():
    rng = np.random.default_rng(0)
    clean, reinforce = rng.uniform(0, 0.1, 32), rng.uniform(0.3, 0.6, 32)
    tis = reinforce + rng.uniform(-5e-6, 5e-6, 32)  # the ratio is 1 on-policy: TIS is REINFORCE to 1e-5
    book = ClaimBook("frictions-2026")
    first = book.greater("reinforce-rises", "REINFORCE's error rises", reinforce, clean)
    second = book.greater("tis-rises", "TIS's error rises", tis, clean)
    assert first.passed and second.passed is None and "one measurement with reinforce-rises" in second.detail
    # two asserted rows on one measurement (e.g. from two figures) are what the audit refuses
    forged = [first, dataclasses.replace(second, figure="other", passed=True)]
    (line,) = claim_audit.identity_violations(forged)
    assert "reinforce-rises and other/tis-rises are one measurement" in line and "agree to" in line
    book.claims.append(forged[1])
    with pytest.raises(ValueError, match="not evidence as stated"):
        book.check()


def test_correlated_rows_are_one_measurement_from_eight_seeds_on():
    rng = np.random.default_rng(1)
    r1000, r0 = rng.uniform(0.85, 0.95, 10), rng.uniform(0.05, 0.0501, 10)
    book = ClaimBook("mnist-staleness")
    above = book.above("fails", "REINFORCE's error is above 0.5", r1000, 0.5)
    rises = book.greater("rises", "REINFORCE at D = 1000 is above D = 0", r1000, r0)
    assert "one line apart" in claim_audit.same_measurement(above, rises)
    # over five seeds a correlation near 1 happens by chance: compared only by agreement
    few = [dataclasses.replace(c, values=c.values[:5]) for c in (above, rises)]
    assert claim_audit.same_measurement(*few) == ""
    # negated (a < b stated as b > a) is the same measurement too
    flipped = dataclasses.replace(rises, name="flipped", values=tuple(-np.asarray(rises.values)))
    assert claim_audit.same_measurement(rises, flipped)


def test_distinct_constant_and_reported_rows_are_not_flagged():
    rng = np.random.default_rng(2)
    book = ClaimBook("fig")
    base = rng.normal(0.5, 0.1, 8)
    book.less("a", "s", base, base + rng.normal(0.2, 0.05, 8))
    book.less("b", "s", base, base + rng.normal(0.2, 0.05, 8))  # the same baseline, a different method: apart
    book.greater("h-star", "DG solves longer", np.full(8, 10.0), np.full(8, 6.0))
    book.greater("h-star-2", "DG solves longer than PMPO", np.full(8, 10.0), np.full(8, 4.0))  # another constant
    info = book.report(book.less("c", "s", base + 1e-7, base + 0.2 + rng.normal(0, 0.05, 8)))
    assert info.passed is None
    assert claim_audit.identity_violations(book.claims) == []


def test_a_post_hoc_choice_is_asserted_only_on_other_seeds():
    choice = Choice("the window of steps 100–300", "5bce20a", "seeds 0–29")
    rng = np.random.default_rng(3)
    book = ClaimBook("async-signatures")
    seen = book.selection(book.below("sync-cos", "sync cosine < 0.1", rng.normal(0.02, 0.05, 30), 0.1), choice)
    assert seen.passed is None and "chosen at 5bce20a after seeds 0–29 were seen" in seen.choice
    assert "the choice of the window of steps 100–300 was made on these seeds" in seen.detail
    new = book.confirmed(book.below("sync-cos-confirmed", "sync cosine < 0.1 (seeds 1000–1029)",
                                    rng.normal(0.02, 0.05, 30), 0.1), choice, "seeds 1000–1029")
    assert new.passed and new.choice.endswith("confirmed on seeds 1000–1029")
    registry = {("async-signatures", "sync-cos*"): choice.what}
    assert claim_audit.audit(book.claims, posthoc=registry) == []
    # asserting the row that saw the data, or a declared choice without its confirmation, is refused
    asserted_selection = dataclasses.replace(seen, passed=True)
    assert "was made on its own data" in claim_audit.confirmation_violations([asserted_selection])[0]
    missing = claim_audit.confirmation_violations([seen], posthoc=registry)
    assert missing == ["async-signatures/sync-cos*: the post-hoc choice (the window of steps 100–300) has no "
                       "asserted row confirmed on other seeds"]


def test_an_identity_consequence_must_be_a_sanity_check():
    rng = np.random.default_rng(4)
    book = ClaimBook("async-signatures")
    ess = book.less("stale-ess-drops", "ESS/B at D = 64 falls below sync", rng.uniform(0.7, 0.9, 30), np.ones(30))
    identities = {"async-signatures": ["stale-ess-drops"]}
    assert "implied by an identity or a theorem" in claim_audit.audit([ess], identities=identities)[0]
    sane = dataclasses.replace(ess, kind="sanity")
    assert claim_audit.identity_label_violations([sane], identities) == []
    # a statistic over seeds is no CHECK the audit can verify: reported, not counted as a sanity check
    assert "a statistic over 30 seeds" in claim_audit.sanity_violations([sane])[0]
    (settled,) = claim_audit.settle([sane])
    assert settled.passed is None and claim_audit.audit([settled], identities=identities) == []


def test_a_reported_row_that_contradicts_a_paper_must_be_asserted():
    rng = np.random.default_rng(5)
    book = ClaimBook("async-signatures")
    worse = book.report(book.less("gac-restores-learning", "with GAC the error is lower", rng.normal(0.5, 0.01, 30),
                                  rng.normal(0.4, 0.01, 30)))
    assert worse.agreement == "contradicts"
    published = {("async-signatures", "*restores*"): "GAC (Abstract): matches synchronized baselines"}
    assert "contradicts the paper's statement" in claim_audit.audit([worse], published=published)[0]
    assert claim_audit.audit([worse]) == []  # no paper states it: a reported measurement may stay reported
    asserted = dataclasses.replace(worse, passed=False)
    assert claim_audit.audit([asserted], published=published) == []
    # the same measurement asserted elsewhere (another figure's row on the same runs) exempts it
    twin = dataclasses.replace(asserted, figure="frictions", name="twin")
    assert claim_audit.contradiction_violations([worse, twin], published) == []


def test_a_later_row_on_an_earlier_rows_measurement_is_reported_not_counted_again():
    rng = np.random.default_rng(6)
    reinforce = rng.uniform(0.0, 0.5, 8)
    kondo10, kondo30 = 0.36 + rng.normal(0, 1e-5, 8), 0.001 + rng.normal(0, 1e-5, 8)  # nearly constant
    book = ClaimBook("kondo")
    first = book.less("kondo10", "Kondo 10% below REINFORCE", kondo10, reinforce)
    second = book.less("kondo30", "Kondo 30% below REINFORCE", kondo30, reinforce)
    assert first.passed is not None and second.passed is None
    assert second.detail.startswith("reported, not counted again: one measurement with kondo10 (")
    assert claim_audit.identity_violations(book.claims) == []
