"""The exact sign-flip test, TOST equivalence, the order-statistic median interval, and the claims
built on them: each checked against a brute-force computation and under its null."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from scipy import stats

from sandbox.analysis import claim_audit
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.exact_tests import equivalence_interval, sign_flip_interval, smallest_p
from sandbox.analysis.stats import median_interval


def _p_greater(d: np.ndarray, delta: float) -> float:
    """Brute force: P over all 2ⁿ sign patterns that mean(s·(d − δ)) ≥ mean(d − δ)."""
    signs = np.array(list(itertools.product([-1, 1], repeat=d.size)))
    x = d - delta
    return float(np.mean(signs @ x / d.size >= x.mean() - 1e-12))


@pytest.mark.parametrize("n", [6, 7, 9])
def test_sign_flip_bounds_are_where_the_enumerated_test_stops_rejecting(n):
    d = np.random.default_rng(n).normal(0.3, 1.0, n)
    iv = sign_flip_interval(d)
    assert iv.estimate == pytest.approx(d.mean()) and iv.n == n and "exact" in iv.method
    # the lower bound is accepted (p > 2.5%) and anything just below it is rejected
    assert _p_greater(d, iv.low) > 0.025 and _p_greater(d, iv.low - 1e-7) <= 0.025
    assert _p_greater(-d, -iv.high) > 0.025 and _p_greater(-d, -iv.high - 1e-7) <= 0.025


def test_sign_flip_by_hand_and_its_smallest_p():
    # n = 6, all positive: only the all-plus pattern reaches the observed mean at δ = 0 → p = 1/64
    d = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert _p_greater(d, 0.0) == pytest.approx(1 / 64) == smallest_p(6)
    assert sign_flip_interval(d).low > 0  # 1/64 < 0.025: rejected at 0
    # at 5 seeds the smallest p-value is 1/32 > 2.5%: no bound exists, a claim cannot pass
    iv = sign_flip_interval(d[:5])
    assert iv.low == -np.inf and iv.high == np.inf
    # equal differences: the sign-flip location is that value, exactly
    assert sign_flip_interval(np.full(10, 0.4)) .low == pytest.approx(0.4)


def test_sign_flip_holds_its_level_on_bimodal_null_data():
    """Symmetric bimodal differences (a seed stuck at 0.5 in either method): the claim passes at
    most 2.5% of the time, where a t-interval need not."""
    rng = np.random.default_rng(0)
    draws, n = 1500, 8
    passes = 0
    for _ in range(draws):
        d = rng.choice([-0.5, 0.5], n) * (rng.random(n) < 0.3) + rng.normal(0, 0.01, n)
        passes += sign_flip_interval(d).high < 0
    assert passes / draws <= 0.025 + 3.5 * (0.025 * 0.975 / draws) ** 0.5


def test_claims_choose_the_sign_flip_test_and_zero_variance_never_gets_a_t_interval():
    book = ClaimBook("fig")
    dg = np.array([0.002, 0.001, 0.0, 0.002, 0.001, 0.003, 0.001, 0.002])
    pg = np.array([0.03, 0.5, 0.02, 0.5, 0.01, 0.02, 0.03, 0.02])  # two seeds stuck on a wrong answer
    claim = book.less("dg-below-pg", "DG's final error is below PG's", dg, pg, test="sign-flip")
    assert claim.passed and "sign-flip" in claim.detail and claim.n == 8
    assert not book.less("five", "five seeds", dg[:5], pg[:5], test="sign-flip").passed  # 1/32 > 2.5%
    # H* censored at the grid's top in every seed: zero variance, decided by the exact test
    constant = book.greater("longer", "DG solves longer sequences", np.full(8, 10.0), np.full(8, 4.0))
    assert constant.passed and "zero variance" in constant.detail and constant.interval == "6"
    with pytest.raises(ValueError, match="paired=True"):
        book.less("unpaired", "s", dg, pg, paired=False, test="sign-flip")
    with pytest.raises(ValueError, match="test must be one of"):
        book.less("bad", "s", dg, pg, test="wilcoxon")
    assert book.below("solved", "DG's error is below 0.2", dg, 0.2, test="sign-flip").passed


def test_one_measurement_is_one_row():
    book = ClaimBook("fig")
    a, b = np.arange(6.0), np.arange(6.0) + 1
    book.less("tis", "TIS's error rises", a, b)
    with pytest.raises(ValueError, match="repeats the measurement of claim 'tis'"):
        book.less("dppo", "DPPO's error rises", a.copy(), b.copy())
    book.greater("other-direction", "the same numbers, the other claim", b, a)  # a different measurement
    book.report(book.less("info", "reported", a + 5, b))
    book.close("sanity", "an identity", 1.0, 1.0, 1e-9)
    book.close("sanity-again", "the same identity", 1.0, 1.0, 1e-9)  # sanity checks may repeat


def test_equivalence_is_a_tost_with_a_declared_band():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.80, 0.05, 20), rng.normal(0.81, 0.05, 20)
    book = ClaimBook("ref")
    pg = rng.normal(0.6, 0.05, 20)  # the other method: far from both
    discriminating = dict(trivial=0.5, margin=0.1, other=pg, worse="low")
    assert book.equivalent("same", "sandbox ≈ reference within ±0.1", a, b, band=0.1, **discriminating).passed
    far = book.equivalent("shifted", "a shifted copy", a + 0.15, b, band=0.1)
    assert not far.passed and "TOST" in far.detail
    # the interval is the 90% Welch interval: by hand
    iv = equivalence_interval(a, b, paired=False)
    va, vb = a.var(ddof=1) / 20, b.var(ddof=1) / 20
    df = (va + vb) ** 2 / (va**2 / 19 + vb**2 / 19)
    half = stats.t.ppf(0.95, df) * np.sqrt(va + vb)
    assert (iv.low, iv.high) == pytest.approx((a.mean() - b.mean() - half, a.mean() - b.mean() + half))
    # a ratio band on the log scale
    steps_a, steps_b = np.exp(rng.normal(5.3, 0.1, 10)), np.exp(rng.normal(5.3, 0.1, 10))
    ratio = book.equivalent("ratio", "steps within ×1.5", steps_a, steps_b, band=1.5, log=True, trivial=1000.0,
                            margin=100.0, other=steps_a * 3, worse="high")
    assert ratio.passed and 1 / 1.5 < ratio.low < ratio.estimate < ratio.high < 1.5
    # too few seeds for the band: equivalence is not shown (not "different")
    assert not book.equivalent("noisy", "3 noisy seeds", a[:3] + rng.normal(0, 0.3, 3), b[:3], band=0.1,
                               **discriminating).passed
    # a diverged seed scores the worst value and widens the interval
    nan = book.equivalent("nan", "one diverged", np.r_[a[:-1], np.nan], b, band=0.1, worse="low")
    worst = min(a[:-1].min(), b.min())
    assert nan.diverged == 1 and nan.n == 20 and nan.estimate == pytest.approx(np.r_[a[:-1], worst].mean() - b.mean())
    with pytest.raises(ValueError, match="band must"):
        book.equivalent("bad", "s", a, b, band=0.9, log=True)


def test_an_equivalence_is_evidence_only_when_it_can_tell_methods_apart():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.80, 0.03, 20), rng.normal(0.80, 0.03, 20)
    book = ClaimBook("ref")
    # without the discrimination inputs: reported, with the reason
    bare = book.equivalent("bare", "s", a, b, band=0.1)
    assert bare.passed is None and "no discrimination check declared" in bare.detail
    # two curves at chance (reward 0.5) are equivalent, and a policy that never learns would pass: INFO
    chance = book.equivalent("chance", "s", 0.5 + a - 0.8, 0.5 + b - 0.8, band=0.1, trivial=0.5, margin=0.1,
                             other=a, worse="low")
    assert chance.passed is None and "not informative: mean of a" in chance.detail
    # the band is wider than the gap to the other method: it cannot tell them apart
    near = book.equivalent("near", "s", a, b + 0.001, band=0.1, trivial=0.5, margin=0.1, other=a - 0.05, worse="low")
    assert near.passed is None and "cannot discriminate" in near.detail
    good = book.equivalent("good", "s", a, b - 0.001, band=0.1, trivial=0.5, margin=0.1, other=a - 0.25, worse="low")
    assert good.passed and good.checks.count("informative:") == 2 and "discriminates:" in good.checks
    assert good.test == "equivalent" and len(good.values) == 40
    assert not claim_audit.discrimination_violations(book.claims)
    # a hand-made asserted equivalence without its checks is a violation of the audit
    forged = dataclasses.replace(good, checks="")
    assert "without its discrimination checks" in claim_audit.discrimination_violations([forged])[0]


def test_median_interval_is_exact_for_any_continuous_distribution():
    assert median_interval(np.arange(10.0)).low == 1 and median_interval(np.arange(10.0)).high == 8
    assert "too few" in median_interval(np.arange(5.0)).method  # no 95% interval from 5 values
    rng = np.random.default_rng(4)
    draws, n = 3000, 10
    x = np.concatenate([rng.normal(0, 0.01, (draws, 7)), rng.normal(0.5, 0.01, (draws, 3))], axis=1)  # bimodal
    true_median = np.median(np.concatenate([rng.normal(0, 0.01, 700_000), rng.normal(0.5, 0.01, 300_000)]))
    covered = np.mean([(lambda iv: iv.low <= true_median <= iv.high)(median_interval(rng.permutation(row)))
                       for row in x[:, :n]])
    assert covered >= 0.95 - 3.5 * (0.05 * 0.95 / draws) ** 0.5


def test_a_claim_says_whether_its_measurement_supports_or_contradicts_its_statement():
    """The GAC case: 'GAC lowers the error' reported with an interval entirely above 0 contradicts it."""
    book = ClaimBook("fig")
    rng = np.random.default_rng(5)
    base = rng.normal(0.5, 0.05, 30)
    raised = book.report(book.less("gac-restores-learning", "with GAC the error is lower", base + 0.07, base))
    assert raised.passed is None and raised.agreement == "contradicts"
    assert book.less("lower", "a is lower", base - 0.07, base).agreement == "supports"
    assert book.less("noise", "a is lower", base + rng.normal(0, 0.05, 30), base).agreement == "inconclusive"
    assert book.above("above", "mean > 0.6", base, 0.6).agreement == "contradicts"


def test_an_equivalence_shown_false_by_more_than_its_band_is_a_fail_whatever_the_curves():
    rng = np.random.default_rng(7)
    stale, sync = rng.normal(0.30, 0.05, 8), rng.normal(0.02, 0.01, 8)  # the stale run is not even informative
    book = ClaimBook("frictions")
    claim = book.equivalent("gac-matches-sync", "GAC at D = 16 matches sync", stale, sync, band=0.1, paired=True,
                            worse="high", trivial=0.5, margin=0.1, other=stale + 0.01)
    assert claim.passed is False and "shown apart" in claim.checks and claim.low > 0.1
    assert not claim_audit.discrimination_violations(book.claims)
