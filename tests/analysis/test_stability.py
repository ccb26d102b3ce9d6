"""Peak, final, late mean and drawdown of a learning curve, by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sandbox.analysis.stability import drawdown, seed_mean, stability


def test_drawdown_by_hand():
    assert drawdown([0.1, 0.7, 0.3, 0.5]) == pytest.approx(0.4)  # fell from 0.7 to 0.3
    assert drawdown([0.1, 0.2, 0.3]) == 0.0  # never falls
    assert drawdown([0.9, 0.2, 0.5, 0.1], higher_is_better=False) == pytest.approx(0.3)  # error rose 0.2 → 0.5
    assert math.isnan(drawdown([float("nan")])) and math.isnan(drawdown([]))


def test_stability_per_seed_by_hand():
    frame = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "step": [0, 10, 20, 40] * 2,
                          "reward": [0.1, 0.7, 0.3, 0.5, 0.2, 0.4, 0.6, 0.8]})
    got = stability(frame.sample(frac=1.0, random_state=0), "reward")  # row order must not matter
    assert got.loc[0].tolist() == pytest.approx([0.7, 0.5, 0.4, 0.4])  # peak, final, late (steps ≥ 20), drawdown
    assert got.loc[1].tolist() == pytest.approx([0.8, 0.8, 0.7, 0.0])
    error = stability(frame.assign(error=1 - frame.reward), "error", higher_is_better=False)
    assert error.loc[0].tolist() == pytest.approx([0.3, 0.5, 0.6, 0.4])


def test_stability_rejects_bad_input():
    with pytest.raises(ValueError, match="no column"):
        stability(pd.DataFrame({"step": [0], "seed": [0]}), "reward")
    with pytest.raises(ValueError, match="non-empty"):
        stability(pd.DataFrame(), "reward")
    with pytest.raises(ValueError, match="one curve"):
        drawdown([[1.0, 2.0]])


def test_a_diverged_seed_stays_nan_where_a_claim_would_read_it():
    """pandas' mean would skip the NaN and average the diverged seed's last good values: no."""
    frame = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "step": [0, 10, 20, 40] * 2,
                          "reward": [0.1, 0.7, float("nan"), float("nan"), 0.2, 0.4, 0.6, 0.8]})
    got = stability(frame, "reward")
    assert got.loc[0, "peak"] == pytest.approx(0.7)  # the best it reached before diverging
    assert all(math.isnan(got.loc[0, c]) for c in ("final", "late", "drawdown"))
    assert got.loc[1].tolist() == pytest.approx([0.8, 0.8, 0.7, 0.0])
    assert math.isnan(drawdown([0.1, 0.7, float("nan")]))
    means = seed_mean(frame, "reward", ["seed"])
    assert math.isnan(means.loc[0]) and means.loc[1] == pytest.approx(0.5)


def test_a_seed_whose_job_stopped_at_divergence_is_carried_to_the_budget():
    from sandbox.analysis.stability import carried_to_budget, seed_mean
    from sandbox.runtime.loop import log_schedule

    schedule = log_schedule(100, 8)
    rows = []
    for member in range(3):
        for step in schedule:
            stopped = member == 1 and step > schedule[3]  # member 1 diverged at schedule[3]; its job stopped
            if stopped:
                break
            nan = member == 1 and step == schedule[3]
            rows.append({"run_id": "r", "member": member, "step": step, "diverged": nan, "steps": 100,
                         "log_points": 8, "error": np.nan if nan else 0.5 - step / 1000, "H": 10})
    frame = pd.DataFrame(rows)
    last = frame[frame.step == frame.step.max()]
    assert sorted(last.member) == [0, 2]  # without carrying, the diverged seed has no final value: dropped
    carried = carried_to_budget(frame)
    final = seed_mean(carried[carried.step == 100], "error", ["member"])
    assert list(final.index) == [0, 1, 2] and np.isnan(final[1]) and final[0] == pytest.approx(0.4)
    tail = carried[(carried.member == 1) & (carried.step > schedule[3])]
    assert list(tail.step) == schedule[4:] and tail.diverged.all() and (tail.H == 10).all()
    assert carried.dtypes.to_dict() == frame.dtypes.to_dict()
    # nothing to carry: a frame without the run's budget, or no diverged member, is returned as is
    assert carried_to_budget(frame.drop(columns="log_points")) is not None
    healthy = frame[frame.member != 1]
    assert carried_to_budget(healthy).equals(healthy)
