"""A case's measurement and interval agree with its declared test, a control-only scale's verdict,
and the agreement rate's exact interval (simulations.cases.outcomes), on hand-made runs."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.cases import Case, load_cases
from simulations.cases.outcomes import (
    CaseResult,
    agreement,
    control_only,
    fisher_p,
    measure,
    odds_text,
)
from simulations.cases.verdicts import judge

STEPS = [0, 1, 2, 4, 8, 16, 32]
LEARNS = [0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05]
COLLAPSES = [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5]
FLAT = [0.5, 0.49, 0.5, 0.48, 0.5, 0.49, 0.5]


def frame(curves):
    return pd.DataFrame([{"step": s, "seed": k, "member": 0, "error": v}
                         for k, curve in enumerate(curves) for s, v in zip(STEPS, curve)])


def case(statistic, **decision):
    arms = {"control": {"loss": "GRPO"}, "worse": {"loss": "GRPO"}, "better": {"loss": "GRPO"}, "arm": {"loss": "GRPO"}}
    return Case("c", {}, "q" * 30, {}, "o", "staleness", arms, None, {"statistic": statistic, **decision}, ())


@pytest.mark.parametrize("k_worse, k_better", list(itertools.product(range(9), repeat=2)))
def test_the_odds_ratio_is_shown_only_where_defined_and_its_interval_passes_one_exactly_when_fisher_rejects(
        k_worse, k_better):
    worse, better = [True] * k_worse + [False] * (8 - k_worse), [True] * k_better + [False] * (8 - k_better)
    text = odds_text(worse, better, 0.05)
    p_forward, p_reverse = fisher_p(worse, better)
    if k_worse + k_better in (0, 16):  # 0/0: no odds ratio, never "nan [0, inf]"
        assert text.startswith("odds ratio undefined") and "nan" not in text
        assert p_forward == p_reverse == 1.0
        return
    low, high = (float(x) for x in text.split("[")[1].split("]")[0].split(", "))
    assert (low > 1) == (p_forward < 0.05) and (high < 1) == (p_reverse < 0.05)


@pytest.mark.parametrize("k_worse, k_better, forward, reverse", [
    (4, 0, 1 / 70, 1.0),  # 4 of 4 against 0 of 4: C(4,4)·C(4,0)/C(8,4) = 1/70
    (0, 4, 1.0, 1 / 70),
])
def test_fishers_one_sided_p_by_hand_on_four_seeds(k_worse, k_better, forward, reverse):
    worse, better = [True] * k_worse + [False] * (4 - k_worse), [True] * k_better + [False] * (4 - k_better)
    assert fisher_p(worse, better) == pytest.approx((forward, reverse))


def test_fishers_p_by_hand_on_eight_seeds():
    """3 of 8 against 0 of 8: P(all 3 collapses fall in the worse arm) = C(8,3)/C(16,3) = 56/560 = 0.1."""
    assert fisher_p([True] * 3 + [False] * 5, [False] * 8)[0] == pytest.approx(0.1)


def test_a_collapse_contrast_shows_the_collapse_counts_the_exact_p_and_the_steps_as_its_per_seed_vector():
    c = case("collapse_contrast", worse="worse", better="better")
    frames = {"control": frame([LEARNS] * 4), "worse": frame([COLLAPSES] * 4), "better": frame([LEARNS] * 4)}
    verdict = judge(c, frames, 32)
    m = measure(c, frames, verdict, 32, 0.05)
    assert verdict.verdict == "agree" and m["side"] == "below" and m["against"] == 0.05
    assert m["estimate"] == m["low"] == m["high"] == pytest.approx(1 / 70) == pytest.approx(verdict.p_forward)
    assert m["values"] == (8, 8, 8, 8, 32, 32, 32, 32)  # collapse steps of worse, then better (32: none)
    assert "4/4" in m["text"] and "0/4" in m["text"] and "p = 0.0143" in m["text"]
    assert "conditional odds ratio inf [" in m["text"]
    none = {"control": frame([LEARNS] * 4), "worse": frame([LEARNS] * 4), "better": frame([LEARNS] * 4)}
    m = measure(c, none, judge(c, none, 32), 32, 0.05)
    # no event in either arm: Fisher's p is 1 by construction, the same for every such case — no estimate,
    # the text keeps the counts and the p
    assert math.isnan(m["estimate"]) and math.isnan(m["low"]) and math.isnan(m["high"])
    assert "0/4" in m["text"] and "p = 1" in m["text"]
    assert "odds ratio undefined (no seed of either arm collapsed)" in m["text"]
    assert "nan" not in m["text"]


def test_a_t_interval_clears_its_threshold_exactly_when_the_declared_t_test_agrees():
    c = case("final_contrast", worse="worse", better="better")
    rng = np.random.default_rng(0)
    for shift in (0.0, 0.02, 0.05, 0.2):
        ends = [[0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05 + shift + e] for e in rng.normal(0, 0.03, 8)]
        frames = {"control": frame([LEARNS] * 8), "worse": frame(ends), "better": frame([LEARNS] * 8)}
        verdict = judge(c, frames, 32)
        m = measure(c, frames, verdict, 32, 0.05)
        assert (m["low"] > 0) == (verdict.verdict == "agree")


def test_noninferiority_is_shown_against_its_margin():
    c = case("noninferior", arm="arm")
    frames = {"control": frame([LEARNS] * 4), "arm": frame([LEARNS] * 4)}
    verdict = judge(c, frames, 32)
    m = measure(c, frames, verdict, 32, 0.05)
    assert m["side"] == "below" and m["against"] == pytest.approx(0.2 * 0.45) and verdict.verdict == "agree"


def test_at_a_control_only_scale_a_control_that_does_not_learn_makes_the_case_inconclusive():
    c = load_cases().case("vcpo_math_k10_tis_collapses_vcpo_stable")
    r = control_only(c, {"control": frame([FLAT, FLAT])}, 32, "long", "paper")
    assert r.verdict == "inconclusive" and not r.conclusive
    assert r.cause == ("does not appear at any size we can run: the control does not learn at 256 tokens in 32 steps "
                       "(0 of 2 seeds learned)")
    learns = control_only(c, {"control": frame([LEARNS, LEARNS])}, 32, "long", "paper")
    assert learns.verdict == "not run" and "other arms were not run" in learns.cause


def test_the_agreement_rate_counts_conclusive_cases_only_with_an_exact_interval():
    c = case("final_contrast")
    results = [CaseResult(c, "reference", v, v) for v in ("agree", "agree", "agree", "disagree", "inconclusive")]
    k, n, rate, low, high = agreement(results)
    ci = stats.binomtest(3, 4).proportion_ci(method="exact")
    assert (k, n, rate) == (3, 4, 0.75) and (low, high) == pytest.approx((ci.low, ci.high))
    assert math.isnan(agreement(results[-1:])[2])
