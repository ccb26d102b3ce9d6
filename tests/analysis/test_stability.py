"""Peak, final, late mean and drawdown of a learning curve, by hand."""

from __future__ import annotations

import math

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
