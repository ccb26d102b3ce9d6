"""Collapse as a measured event (sandbox.analysis.collapse) on hand-made curves."""

import math

import numpy as np
import pandas as pd
import pytest

from sandbox.analysis.collapse import (
    COLLAPSE_FRACTION,
    LEARNED_FRACTION,
    TRACK_FRACTION,
    collapse_event,
    collapse_step,
    collapse_table,
    gain_at,
    prosperity_before_collapse,
)

STEPS = [0, 1, 2, 4, 8, 16, 32]


def test_thresholds_are_the_documented_ones():
    assert (LEARNED_FRACTION, COLLAPSE_FRACTION, TRACK_FRACTION) == (0.2, 0.5, 0.8)


def test_learns_then_collapses_for_good():
    # error 0.5 → best 0.1 at step 4 (gain 0.4); 0.35 at step 8 has lost 0.25 ≥ 0.5·0.4 and never comes back
    e = collapse_event(STEPS, [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5])
    assert e.learned and e.learned_step == 1  # 0.5 − 0.3 = 0.2 ≥ 0.2·0.5
    assert (e.peak_step, e.collapse_step) == (4, 8)
    assert collapse_step(STEPS, [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5]) == 8


def test_a_dip_that_recovers_is_not_a_collapse():
    e = collapse_event(STEPS, [0.5, 0.3, 0.2, 0.1, 0.4, 0.2, 0.1])
    assert e.learned and not e.collapsed and e.peak_step == 4  # first step at the best value 0.1


def test_recovery_is_judged_against_the_pre_collapse_best():
    # falls to 0.4 at step 8 (loss 0.3 of a gain 0.4), ends at 0.29: still ≥ 0.1 + 0.5·0.4 = 0.3? no: recovered
    assert collapse_step(STEPS, [0.5, 0.3, 0.2, 0.1, 0.4, 0.45, 0.29]) is None
    # ends at 0.30 exactly: the loss is exactly half the gain, not recovered
    assert collapse_step(STEPS, [0.5, 0.3, 0.2, 0.1, 0.4, 0.45, 0.30000001]) == 8


def test_a_run_that_never_learned_never_collapses():
    e = collapse_event(STEPS, [0.5, 0.49, 0.45, 0.42, 0.6, 0.7, 0.9])  # best gain 0.08 < 0.2·0.5
    assert not e.learned and e.learned_step is None and not e.collapsed


def test_small_wobbles_below_half_the_gain_are_not_collapses():
    assert collapse_step(STEPS, [0.5, 0.2, 0.1, 0.25, 0.28, 0.29, 0.29]) is None  # loss 0.19 < 0.5·0.4


def test_nan_is_the_worst_value_and_diverged_runs_collapse_at_their_first_nan():
    assert collapse_step(STEPS, [0.5, 0.3, 0.1, math.nan, math.nan, math.nan, math.nan]) == 4
    # a run that diverges before it learned has not collapsed (it never learned)
    assert not collapse_event(STEPS, [0.5, 0.48, math.nan, math.nan, math.nan, math.nan, math.nan]).learned


def test_a_run_stopped_before_its_budget_counts_as_worst_there():
    # the loop stops when every member diverged: the curve ends at step 4 of a 32-step budget
    assert collapse_step([0, 1, 2, 4], [0.5, 0.3, 0.1, 0.1], budget=32) == 32
    assert collapse_step([0, 1, 2, 4], [0.5, 0.3, 0.1, 0.1]) is None  # without the budget: it ended at its best
    with pytest.raises(ValueError, match="budget must be ≥ the last logged step 4"):
        collapse_step([0, 1, 2, 4], [0.5, 0.3, 0.1, 0.1], budget=3)


def test_higher_is_better_metrics_flip_and_need_their_best_value():
    reward = [0.2, 0.5, 0.9, 0.9, 0.4, 0.3, 0.25]  # gain 0.7 of a range 0.8; falls to 0.4: lost 0.5 ≥ 0.35
    assert collapse_step(STEPS, reward, higher_is_better=True, best_possible=1.0) == 8
    assert collapse_step(STEPS, [0.2, 0.5, 0.9, math.nan, math.nan, math.nan, math.nan], higher_is_better=True,
                         best_possible=1.0) == 4
    with pytest.raises(ValueError, match="best_possible is required"):
        collapse_step(STEPS, reward, higher_is_better=True)


def test_a_run_that_starts_perfect_neither_learns_nor_collapses():
    assert not collapse_event(STEPS, [0.0, 0.0, 0.3, 0.5, 0.5, 0.5, 0.5]).learned


def test_bad_curves_raise_one_line():
    with pytest.raises(ValueError, match="strictly increasing"):
        collapse_step([0, 2, 1], [0.5, 0.4, 0.3])
    with pytest.raises(ValueError, match="one length"):
        collapse_step([0, 1], [0.5])
    with pytest.raises(ValueError, match="start"):
        collapse_step([0, 1], [math.nan, 0.5])


def test_gain_at_reads_the_best_so_far():
    assert gain_at(STEPS, [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5], 8) == pytest.approx(0.4)
    assert gain_at(STEPS, [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5], 2) == pytest.approx(0.3)


def test_prosperity_before_collapse_needs_tracking_the_control_then_collapsing():
    control = [0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05]
    tracked = [0.5, 0.32, 0.2, 0.12, 0.4, 0.45, 0.5]  # gain 0.38 at step 4 ≥ 0.8 × control's 0.4
    lagging = [0.5, 0.45, 0.4, 0.35, 0.48, 0.5, 0.5]  # gain 0.15 at its peak: learned (≥ 0.1), far below 0.8 × 0.4
    assert prosperity_before_collapse(STEPS, tracked, STEPS, control)
    assert collapse_step(STEPS, lagging) is not None
    assert not prosperity_before_collapse(STEPS, lagging, STEPS, control)
    assert not prosperity_before_collapse(STEPS, control, STEPS, control)  # no collapse, no shape


def test_collapse_table_per_seed():
    rows = []
    for seed, curve in ((0, [0.5, 0.3, 0.2, 0.1, 0.35, 0.45, 0.5]), (1, [0.5, 0.3, 0.2, 0.1, 0.08, 0.06, 0.05])):
        rows += [{"seed": seed, "member": 0, "step": s, "error": v} for s, v in zip(STEPS, curve)]
    table = collapse_table(pd.DataFrame(rows))
    assert table.loc[(0, 0), "collapse_step"] == 8
    assert pd.isna(table.loc[(1, 0), "collapse_step"]) and bool(table.loc[(1, 0), "learned"])
    # a seed that stopped early (diverged) is worst until the frame's last step
    short = pd.DataFrame(rows[:4] + rows[7:])
    assert collapse_table(short).loc[(0, 0), "collapse_step"] == 32
    with pytest.raises(ValueError, match="no column"):
        collapse_table(pd.DataFrame(rows), metric="reward")
    assert np.isfinite(table["peak_step"].astype(float)).all()
