"""The second amendment's decision rules, executable (simulations/cases/verdicts.py), on hand-made
runs: a dip, a plain arm that does or does not pass, a signal against another arm or lower, a frozen
control, a late rise, and which signal fires first."""

import numpy as np
import pandas as pd
import pytest

from simulations.cases import Case
from simulations.cases.verdicts import dip_event, judge

STEPS = [0, 1, 2, 4, 8, 16, 32]
LEARNS = [0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05]
DIPS = [0.5, 0.3, 0.2, 0.1, 0.35, 0.1, 0.05]  # loses 62% of its gain at step 8, then regains it
COLLAPSES = [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5]
FLAT = [0.5, 0.49, 0.5, 0.48, 0.5, 0.49, 0.5]


def frame(curves, **signals):
    rows = []
    for seed, curve in enumerate(curves):
        for i, (s, v) in enumerate(zip(STEPS, curve)):
            rows.append({"step": s, "seed": seed, "member": 0, "error": v,
                         **{name: values[seed][i] for name, values in signals.items()}})
    return pd.DataFrame(rows)


def case(statistic, **decision):
    arms = {name: {"loss": "GRPO"} for name in ("control", "worse", "better", "arm", "plain")}
    return Case("c", {}, "q" * 30, {}, "o", "staleness", arms, None, {"statistic": statistic, **decision}, ())


def test_a_dip_is_an_event_only_when_the_decision_asks_for_it():
    assert dip_event(STEPS, DIPS, 32).collapse_step == 8
    assert dip_event(STEPS, LEARNS, 32).collapse_step is None and dip_event(STEPS, FLAT, 32).learned is False
    frames = {"control": frame([LEARNS] * 4), "worse": frame([DIPS] * 4), "better": frame([LEARNS] * 4)}
    assert judge(case("collapse_contrast", worse="worse", better="better", event="dip"), frames, 32).verdict == "agree"
    assert judge(case("collapse_contrast", worse="worse", better="better"), frames, 32).verdict == "not-reproduced"


def test_a_noninferiority_agreement_that_the_plain_arm_shares_does_not_discriminate():
    c = case("noninferior", arm="arm", plain="plain")
    noisy = [[v + 0.01 * k for v in LEARNS] for k in range(4)]
    both = judge(c, {"control": frame([LEARNS] * 4), "arm": frame(noisy), "plain": frame(noisy)}, 32)
    assert both.verdict == "does-not-discriminate" and both.detail["plain"]["verdict"] == "agree"
    only = judge(c, {"control": frame([LEARNS] * 4), "arm": frame(noisy), "plain": frame([FLAT] * 4)}, 32)
    assert only.verdict == "agree" and only.detail["plain"]["verdict"] == "opposite"
    first_round = case("noninferior", arm="arm")
    assert judge(first_round, {"control": frame([LEARNS] * 4), "arm": frame(noisy)}, 32).verdict == "agree"


def test_signal_level_against_another_arm_and_downwards():
    low = [[0.1 + 0.01 * k] * 7 for k in range(4)]
    high = [[1.0 + 0.03 * k] * 7 for k in range(4)]
    frames = {"control": frame([LEARNS] * 4, sig=high), "worse": frame([LEARNS] * 4, sig=low),
              "better": frame([LEARNS] * 4, sig=high)}
    down = case("signal_level", worse="worse", against="better", signal="sig", direction="down")
    assert judge(down, frames, 32).verdict == "agree"
    up = case("signal_level", worse="worse", against="better", signal="sig")
    assert judge(up, frames, 32).verdict == "opposite"


def test_a_frozen_control_cannot_decide_a_signal_level():
    cos = [[0.0] * 7 for _ in range(4)]
    stale_cos = [[0.2 + 0.05 * k] * 7 for k in range(4)]
    frozen = [[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0] for _ in range(4)]  # gradient exactly 0 in the second half
    live = [[1.0] * 7 for _ in range(4)]
    c = case("signal_level", worse="worse", signal="sig", min_live=0.75)
    frames = {"control": frame([LEARNS] * 4, sig=cos, grad_norm=frozen),
              "worse": frame([LEARNS] * 4, sig=stale_cos, grad_norm=live)}
    v = judge(c, frames, 32)
    assert v.verdict == "inconclusive" and v.detail["frozen"]
    first_round = case("signal_level", worse="worse", signal="sig")
    assert judge(first_round, frames, 32).verdict == "agree"  # what the first round read: the frozen 0 decided it
    frames["control"] = frame([LEARNS] * 4, sig=cos, grad_norm=live)
    assert judge(c, frames, 32).verdict == "agree"


def test_signal_trend_reads_the_late_rise_over_the_low():
    rising = [[1.0, 0.5, 0.4, 0.4, 0.5, 0.8, 2.0 + 0.3 * k] for k in range(4)]  # last quarter: step 32
    flat = [[1.0] * 6 + [1.0 + 0.01 * k] for k in range(4)]  # x ≈ 0, below log10(2)
    c = case("signal_trend", worse="worse", signal="sig", factor=2.0)
    assert judge(c, {"control": frame([LEARNS] * 4), "worse": frame([LEARNS] * 4, sig=rising)}, 32).verdict == "agree"
    assert judge(c, {"control": frame([LEARNS] * 4), "worse": frame([LEARNS] * 4, sig=flat)}, 32).verdict == "opposite"


@pytest.mark.parametrize("first, second, verdict", [("kl", "gn", "agree"), ("gn", "kl", "opposite")])
def test_signal_lead_asks_which_signal_reaches_its_factor_first(first, second, verdict):
    # learned at step 1, collapse at step 8: the window is steps 1, 2, 4, 8
    early = [[1.0, 1.0, 20.0, 30.0, 40.0, 40.0, 40.0] for _ in range(4)]  # tenfold at step 2
    late = [[1.0, 1.0, 1.0, 30.0, 40.0, 40.0, 40.0] if k else [1.0, 1.0, 1.0, 1.0, 40.0, 40.0, 40.0]
            for k in range(4)]  # tenfold at step 4 (seed 0: 8)
    c = case("signal_lead", worse="worse", signal="kl", lagging="gn", factor=10.0)
    signals = {first: early, second: late}
    v = judge(c, {"control": frame([LEARNS] * 4), "worse": frame([COLLAPSES] * 4, **signals)}, 32)
    assert v.verdict == verdict
    assert sorted(np.abs(v.detail["lead"])) == [2.0, 2.0, 2.0, 6.0]
    none = judge(c, {"control": frame([LEARNS] * 4), "worse": frame([LEARNS] * 4, **signals)}, 32)
    assert none.verdict == "not-reproduced" and none.detail["lead"] == []


def test_the_report_measures_every_amended_rule_with_the_side_its_test_reads():
    from simulations.cases.outcomes import SHOWN, _cause, measure

    lows = [[0.1 + 0.01 * k] * 7 for k in range(4)]
    highs = [[1.0 + 0.03 * k] * 7 for k in range(4)]
    rising = [[1.0, 0.5, 0.4, 0.4, 0.5, 0.8, 2.0 + 0.3 * k] for k in range(4)]
    early = [[1.0, 1.0, 20.0, 30.0, 40.0, 40.0, 40.0] for _ in range(4)]
    late = [[1.0, 1.0, 1.0, 30.0 if k else 1.0, 40.0, 40.0, 40.0] for k in range(4)]
    checks = [
        (case("signal_level", worse="worse", against="better", signal="sig", direction="down"),
         {"control": frame([LEARNS] * 4, sig=highs), "worse": frame([LEARNS] * 4, sig=lows),
          "better": frame([LEARNS] * 4, sig=highs)}, "below", 0.0),
        (case("signal_trend", worse="worse", signal="sig", factor=2.0),
         {"control": frame([LEARNS] * 4), "worse": frame([LEARNS] * 4, sig=rising)}, "above", np.log10(2.0)),
        (case("signal_lead", worse="worse", signal="kl", lagging="gn", factor=10.0),
         {"control": frame([LEARNS] * 4), "worse": frame([COLLAPSES] * 4, kl=early, gn=late)}, "above", 0.0),
        (case("collapse_contrast", worse="worse", better="better", event="dip"),
         {"control": frame([LEARNS] * 4), "worse": frame([DIPS] * 4), "better": frame([LEARNS] * 4)}, "below", 0.05),
    ]  # a collapse contrast reads Fisher's exact one-sided p against α (4/4 against 0/4: p = 1/70)
    for c, frames, side, against in checks:
        verdict = judge(c, frames, 32)
        m = measure(c, frames, verdict, 32, 0.05)
        assert verdict.verdict == "agree" and (m["side"], m["against"]) == (side, pytest.approx(against)), c.decision
        beyond = m["high"] < against if side == "below" else m["low"] > against
        assert beyond, (c.decision, m)
    noisy = [[v + 0.01 * k for v in LEARNS] for k in range(4)]
    c = case("noninferior", arm="arm", plain="plain")
    verdict = judge(c, {"control": frame([LEARNS] * 4), "arm": frame(noisy), "plain": frame(noisy)}, 32)
    assert SHOWN[verdict.verdict] == "does not discriminate"
    assert _cause(c, verdict, {}).startswith("does not discriminate: the plain arm passes the same test")
