"""The case file's decision rules, executable (simulations/cases/verdicts.py), on hand-made runs."""

import math

import numpy as np
import pandas as pd
import pytest

from simulations.cases import Case
from simulations.cases.verdicts import judge

STEPS = [0, 1, 2, 4, 8, 16, 32]
LEARNS = [0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05]
COLLAPSES = [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5]
FLAT = [0.5, 0.49, 0.5, 0.48, 0.5, 0.49, 0.5]


def frame(curves, signal=None):
    rows = []
    for seed, curve in enumerate(curves):
        for i, (s, v) in enumerate(zip(STEPS, curve)):
            row = {"step": s, "seed": seed, "member": 0, "error": v}
            if signal is not None:
                row["sig"] = signal[seed][i]
            rows.append(row)
    return pd.DataFrame(rows)


def case(statistic, **decision):
    arms = {"control": {"loss": "GRPO"}, "worse": {"loss": "GRPO"}, "better": {"loss": "GRPO"}, "arm": {"loss": "GRPO"}}
    return Case("c", {}, "q" * 30, {}, "o", "staleness", arms, None, {"statistic": statistic, **decision}, ())


def test_collapse_contrast_agrees_opposes_or_does_not_reproduce():
    c = case("collapse_contrast", worse="worse", better="better")
    control = frame([LEARNS] * 4)
    v = judge(c, {"control": control, "worse": frame([COLLAPSES] * 4), "better": frame([LEARNS] * 4)}, 32)
    assert v.verdict == "agree" and v.p_forward == pytest.approx(1 / 70)  # 4/4 against 0/4, Fisher one-sided
    v = judge(c, {"control": control, "worse": frame([LEARNS] * 4), "better": frame([COLLAPSES] * 4)}, 32)
    assert v.verdict == "opposite"
    v = judge(c, {"control": control, "worse": frame([LEARNS] * 4), "better": frame([LEARNS] * 4)}, 32)
    assert v.verdict == "not-reproduced"


def test_a_control_that_does_not_learn_or_collapses_makes_the_case_inconclusive():
    c = case("collapse_contrast", worse="worse", better="better")
    worse, better = frame([COLLAPSES] * 4), frame([LEARNS] * 4)
    assert judge(c, {"control": frame([FLAT] * 4), "worse": worse, "better": better}, 32).verdict == "inconclusive"
    assert judge(c, {"control": frame([LEARNS] * 3 + [COLLAPSES]), "worse": worse, "better": better},
                 32).verdict == "inconclusive"


def test_final_contrast_pairs_by_seed_and_counts_diverged_seeds_as_worst():
    c = case("final_contrast", worse="worse", better="better")
    worse = frame([[0.5, 0.4, 0.3, 0.3, 0.3, math.nan, math.nan]] * 2 + [[0.5, 0.4, 0.3, 0.3, 0.3, 0.3, 0.31]] * 2)
    v = judge(c, {"control": frame([LEARNS] * 4), "worse": worse, "better": frame([LEARNS] * 4)}, 32)
    assert v.verdict == "agree"
    assert v.detail["difference"] == [0.95, 0.95, 0.26, 0.26]  # NaN → worst 1.0


def test_noninferior_against_a_fifth_of_the_control_gain():
    c = case("noninferior", arm="arm")
    control = frame([LEARNS] * 4)  # gain 0.45 → δ = 0.09
    close = frame([[0.5, 0.3, 0.2, 0.1, 0.08, 0.07, 0.05 + e] for e in (0.0, 0.01, 0.02, 0.01)])
    assert judge(c, {"control": control, "arm": close}, 32).verdict == "agree"
    far = frame([[0.5, 0.4, 0.35, 0.3, 0.3, 0.3, 0.3 + e] for e in (0.0, 0.01, 0.02, 0.01)])
    assert judge(c, {"control": control, "arm": far}, 32).verdict == "opposite"


def test_signal_rise_reads_the_step_before_the_collapse_against_the_learned_step():
    c = case("signal_rise", worse="worse", signal="sig", direction="up", factor=10.0)
    rising = [[1, 1, 2, 5, 50, 60, 60]] * 3 + [[1, 1, 1, 2, 200, 1, 1]]  # learned at step 1, collapse at 8: s(4)/s(1)
    v = judge(c, {"control": frame([LEARNS] * 4), "worse": frame([COLLAPSES] * 4, rising)}, 32)
    assert np.allclose(v.detail["log10_rise"], [math.log10(5)] * 3 + [math.log10(2)])
    assert v.verdict == "opposite"  # a rise of 2-5×, significantly below the declared tenfold
    few = judge(c, {"control": frame([LEARNS] * 4), "worse": frame([COLLAPSES] * 2 + [LEARNS] * 2, rising)}, 32)
    assert few.verdict == "not-reproduced" and few.detail["collapsed_seeds"] == 2


def test_signal_level_compares_the_late_half_with_the_control():
    c = case("signal_level", worse="worse", signal="sig")
    low = [[0.0, 0.1, 0.0, 0.1, 0.0, 0.05, 0.02]] * 4
    high = [[0.0, 0.5, 0.6, 0.5, 0.6, 0.7 + 0.01 * k, 0.6] for k in range(4)]
    v = judge(c, {"control": frame([LEARNS] * 4, low), "worse": frame([LEARNS] * 4, high)}, 32)
    assert v.verdict == "agree"
