"""Claims hold their nominal false-pass rate at 3–10 seeds; diverged seeds count; sanity checks apart."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from sandbox.analysis.claims import ClaimBook, format_claims, load_claims, score_diverged
from sandbox.analysis.stats import BOOTSTRAP_MIN_N, interval, t_interval, welch_interval

DRAWS = 4000  # null data sets per (claim kind, n)
NOMINAL = 0.025  # a one-sided claim decided by a two-sided 95% interval
SE = (NOMINAL * (1 - NOMINAL) / DRAWS) ** 0.5
WORST = {"high": np.nanmax, "low": np.nanmin}


def _fill(a, b, worse):
    """score_diverged's rule, vectorised over draws (rows); checked against it below."""
    pool = np.concatenate([a, b], axis=1)
    value = WORST[worse](pool, axis=1, keepdims=True)
    return np.where(np.isnan(a), value, a), np.where(np.isnan(b), value, b)


def _null_decisions(n: int, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, bool]]:
    """For every claim kind, whether each null draw would pass: (passes [DRAWS], exact test?).
    Exact kinds must sit at the nominal rate; the others at or below it."""
    shape = (DRAWS, n)
    shared = rng.normal(0, 5, shape)  # seed effect common to both methods (paired claims)
    a, b = shared + rng.normal(size=shape), shared + rng.normal(size=shape)
    wide = rng.normal(0, 3, shape)  # unpaired, unequal spread: Welch's case
    ta, tb = rng.standard_t(3, shape), rng.standard_t(3, shape)  # heavy tails
    na, nb = a.copy(), b.copy()  # 20% of the runs diverge in each method
    na[rng.random(shape) < 0.2] = np.nan
    nb[rng.random(shape) < 0.2] = np.nan
    fa, fb = _fill(na, nb, "high")
    paired, unpaired, one = t_interval(a - b), welch_interval(a, wide), t_interval(a - shared)
    return {
        "less paired": (paired.high < 0, True), "greater paired": (paired.low > 0, True),
        "less unpaired (Welch)": (welch_interval(a, wide).high < 0, False),
        "greater unpaired (Welch)": (unpaired.low > 0, False),
        "less unpaired, equal spread": (welch_interval(a, b).high < 0, False),
        "below": (one.high < 0, True), "above": (one.low > 0, True),
        "less paired, heavy tails": (t_interval(ta - tb).high < 0, False),
        "less paired, 20% diverged (worse=high)": (t_interval(fa - fb).high < 0, False),
        "greater unpaired, 20% diverged (worse=high)": (welch_interval(fa, fb).low > 0, False),
    }


@pytest.mark.parametrize("n", [3, 4, 5, 10])
def test_every_claim_kind_holds_its_nominal_false_pass_rate(n):
    rates = {kind: (float(np.mean(passes)), exact)
             for kind, (passes, exact) in _null_decisions(n, np.random.default_rng(n)).items()}
    too_often = {k: r for k, (r, _) in rates.items() if r > NOMINAL + 3.5 * SE}
    too_rarely = {k: r for k, (r, exact) in rates.items() if exact and r < NOMINAL - 3.5 * SE}
    assert not too_often, f"n={n}: false-pass rate above {NOMINAL:.1%} (± MC error {SE:.2%}): {too_often}"
    assert not too_rarely, f"n={n}: an exact interval is conservative, so it is miscomputed: {too_rarely}"


def test_claimbook_decides_as_the_vectorised_rule():
    """The claims layer takes the same decisions as the intervals the null test measures."""
    rng = np.random.default_rng(7)
    book = ClaimBook("null")
    for n in (3, 5):
        a, b = rng.normal(size=(150, n)), rng.normal(0.8, 2.0, size=(150, n))
        a[rng.random(a.shape) < 0.15] = np.nan
        fa, fb = _fill(a, b, "high")
        want = {"less": t_interval(fa - fb).high < 0, "greater-unpaired": welch_interval(fa, fb).low > 0,
                "below": t_interval(np.where(np.isnan(a), np.maximum(np.nanmax(a, 1, keepdims=True), 0.5), a)).high < 0.5}
        for i in range(len(a)):
            assert book.less("l", "s", a[i], b[i], worse="high").passed == want["less"][i]
            assert book.greater("g", "s", a[i], b[i], paired=False, worse="high").passed == want["greater-unpaired"][i]
            if not np.isnan(a[i]).all():
                assert book.below("b", "s", a[i], 0.5, worse="high").passed == want["below"][i]


def test_intervals_match_scipy_tests():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=6), rng.normal(1, 3, size=4)
    lo, hi = stats.ttest_1samp(x, 0).confidence_interval(0.9)
    iv = t_interval(x, 0.9)
    assert (iv.low, iv.high, iv.n) == (pytest.approx(lo), pytest.approx(hi), 6)
    lo, hi = stats.ttest_ind(x, y, equal_var=False).confidence_interval()
    iv = welch_interval(x, y)
    assert (iv.low, iv.high) == (pytest.approx(lo), pytest.approx(hi)) and iv.estimate == pytest.approx(x.mean() - y.mean())
    cols = t_interval(np.array([[1.0, np.nan], [2.0, np.nan], [4.0, 5.0]]), axis=0)
    assert cols.n.tolist() == [3, 1] and np.isnan(cols.high[1]) and cols.estimate[1] == 5.0


def test_bootstrap_is_refused_at_few_seeds():
    with pytest.raises(ValueError, match=f"at least {BOOTSTRAP_MIN_N} values"):
        interval(np.arange(5.0), "iqm")
    assert interval(np.arange(40.0), "iqm").method.startswith("bootstrap")
    with pytest.raises(ValueError, match="free of NaN"):
        interval([1.0, np.nan])
    with pytest.raises(ValueError, match="confidence must lie in"):
        t_interval([1.0, 2.0], confidence=1.5)


def test_diverged_seeds_count_as_the_worst_value():
    book = ClaimBook("div")
    a, b = np.array([1.0, 1.0, 1.0, np.nan, np.nan]), np.full(5, 2.0)
    # dropping the NaN pairs would leave three identical differences: a zero-width interval, a pass
    claim = book.less("a-lower", "a's error is below b's", a, b, worse="high")
    assert not claim.passed and claim.n == 5 and claim.diverged == 2
    assert "2 of 5 in a" in claim.detail and "highest" in claim.detail
    # a diverged *baseline* is the worst error there is, which supports the claim
    good = book.less("b-diverged", "a's error is below b's", np.full(5, 1.0) + np.arange(5) * 0.01,
                     np.array([2.0, 2.1, np.nan, 1.9, 2.0]), worse="high")
    assert good.passed and good.diverged == 1
    # without `worse`, a NaN counts against the claim on either side
    b = np.array([1.3, np.nan, np.nan, 1.2, 1.3])
    assert book.less("metric", "a < b", np.ones(5), b, worse="high").passed
    assert not book.less("against", "a < b", np.ones(5), b).passed
    assert not book.greater("against-g", "b > a", b, np.ones(5)).passed
    # a threshold claim: the diverged seed sits at least at the threshold
    assert not book.below("below", "error < 0.5", [0.1, 0.1, 0.1, np.nan], 0.5, worse="high").passed
    assert not book.close("close", "ESS = 1", [1.0, np.nan], 1.0, tol=1e-9).passed
    assert not book.less("all", "a < b", [np.nan] * 3, [np.nan] * 3).passed
    never = book.less("never-reached", "a needs fewer steps", [10.0, np.inf, 12.0], [20.0, 21.0, 19.0], worse="high")
    assert never.diverged == 1 and not never.passed  # inf (never reached) is scored like a diverged seed
    assert "(2 div)" in format_claims([claim])
    filled, count = score_diverged([np.array([np.nan, 0.0]), np.array([3.0, np.nan])], ["high", "low"], None, (5.0,))
    assert count == 2 and filled[0].tolist() == [5.0, 0.0] and filled[1].tolist() == [3.0, 0.0]
    with pytest.raises(ValueError, match="worse must be one of"):
        book.less("x", "s", a, b, worse="bad")


def test_sanity_checks_are_listed_apart_and_the_table_fits(tmp_path):
    book = ClaimBook("a-figure-with-a-long-name", path=tmp_path / "c.json")
    rng = np.random.default_rng(0)
    book.less("dg-lower-error-than-the-baseline-at-every-step", "DG's error is lower than the baseline's at every "
              "logged step, a statement long enough to be wrapped over several lines", rng.normal(0, 1, 8), rng.normal(3, 1, 8))
    book.close("sync-ess-is-one", "synchronous: ESS/B = 1 exactly", [1.0, 1.0], 1.0, tol=1e-12)
    table = format_claims(load_claims(tmp_path / "c.json"))
    lines = table.splitlines()
    assert max(map(len, lines)) <= 120
    evidence, sanity = table.index("Claims (evidence)"), table.index("Sanity checks")
    assert evidence < table.index("PASS") < sanity < table.index("CHECK")
    assert "1/1 evidence claims passed" in lines[-1] and "1/1 sanity checks hold" in lines[-1]
    with pytest.raises(ValueError, match="kind must be one of"):
        book.less("x", "s", [1.0, 2.0], [3.0, 4.0], kind="identity")
    # a number computed without sampling cannot fail unless the code is wrong: never evidence
    assert book.exact("closed-form", "a closed form", 1.0, True).kind == "sanity"
    old = [{k: v for k, v in c.items() if k not in ("kind", "n", "diverged")}
           for c in json.loads((tmp_path / "c.json").read_text())["data"]]
    (tmp_path / "old.json").write_text(json.dumps(old))  # a bare list, as written before claims had a checksum
    assert [c.kind for c in load_claims(tmp_path / "old.json")] == ["evidence"] * len(old)  # old files predate kinds


def test_less_throughout_needs_every_column():
    rng = np.random.default_rng(2)
    a = rng.normal(0, 0.1, (6, 3)) + np.array([0.0, 0.0, 1.0])  # the last column is not below b
    b = rng.normal(0.5, 0.1, (6, 3))
    book = ClaimBook("window")
    claim = book.less_throughout("ordered", "a < b at every step", a, b, [10, 20, 30])
    assert not claim.passed and "2 of 3 columns pass; worst at 30" in claim.detail and claim.high > 0
    # its first two columns are a subset of the same measurement: one row (the FAIL counts) …
    assert book.less_throughout("ordered-early", "a < b at steps 10, 20", a[:, :2], b[:, :2], [10, 20]).passed is None
    # … stated alone, they pass
    assert ClaimBook("early").less_throughout("ordered-early", "a < b at steps 10, 20", a[:, :2], b[:, :2],
                                              [10, 20]).passed
    with pytest.raises(ValueError, match="one column per entry"):
        book.less_throughout("bad", "s", a, b, [10, 20])


def test_the_footer_says_what_the_bands_are(tmp_path):
    from sandbox.analysis.plotting import band, bands_note, plt, save_figure

    fig, (left, right) = plt.subplots(1, 2)
    assert bands_note(fig) is None
    band(left, np.arange(4), np.ones((5, 4)) + np.arange(5)[:, None], "pg")
    band(right, np.arange(4), np.ones((8, 4)), "dg")
    assert bands_note(fig) == "bands: 95% t-intervals of the mean over 5–8 seeds"
    save_figure(fig, "f", outdir=tmp_path, note="fidelity=quick")
    assert [t.get_text() for t in fig.texts] == ["fidelity=quick, bands: 95% t-intervals of the mean over 5–8 seeds"]
    with pytest.raises(ValueError, match="statistic must be one of"):
        band(left, np.arange(4), np.ones((5, 4)), "pg", statistic="mode")
    plt.close(fig)


def test_a_measured_quantity_is_reported_with_its_t_interval_and_diverged_seeds_at_the_worst_end():
    book = ClaimBook("fig")
    values = np.array([0.1, 0.3, 0.2, 0.6])
    c = book.measure("dg-error", "DG's final error", values, worse="high")
    n, mean, sd = 4, 0.3, np.std(values, ddof=1)  # by hand: 0.3 ± t_{3, .975}·s/2
    half = stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)
    assert (c.passed, c.verdict, c.n, c.diverged) == (None, "INFO", 4, 0)
    assert np.allclose([c.estimate, c.low, c.high], [mean, mean - half, mean + half])
    c = book.measure("dg-error-nan", "with a diverged seed", [0.1, np.nan, 0.2], worse="high")
    assert c.diverged == 1 and np.isclose(c.estimate, (0.1 + 0.2 + 0.2) / 3)  # NaN → the highest value
    c = book.measure("reward", "a reward", [0.5, np.nan, 0.9], worse="low")
    assert np.isclose(c.estimate, (0.5 + 0.5 + 0.9) / 3)
    assert np.isnan(book.measure("all-nan", "every seed diverged", [np.nan, np.nan], worse="high").estimate)
    with pytest.raises(ValueError, match="worse must be 'high' or 'low'"):
        book.measure("x", "y", values, worse=None)
    with pytest.raises(AssertionError, match="no claims were asserted"):
        book.check()  # measurements alone assert nothing
