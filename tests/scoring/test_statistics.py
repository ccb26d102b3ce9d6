"""Scorecard statistics: hand-computed values, and the false-pass rate of a claim under the null
hypothesis at the nominal level."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sandbox.analysis.stats import iqm
from sandbox.scoring.statistics import (
    aggregate_iqm,
    cell_interval,
    probability_of_improvement,
    stratified_bootstrap,
    t_interval,
)


def test_t_interval_by_hand():
    x = np.array([0.2, 0.4, 0.6])
    iv = t_interval(x)
    half = stats.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)  # s = 0.2
    assert iv.estimate == pytest.approx(0.4) and iv.n == 3
    assert (iv.low, iv.high) == pytest.approx((0.4 - half, 0.4 + half))
    clipped = cell_interval(x)  # scores live in [0, 1]
    assert half > 0.4 and clipped.low == 0.0 and clipped.high == pytest.approx(0.4 + half)
    assert cell_interval([0.3]).low == 0 and cell_interval([0.3]).high == 1  # one seed: no information


def test_the_scorecard_t_interval_is_the_analysis_one_clipped():
    # one Student-t interval in the package: the scorecard's clips sandbox.analysis.stats.t_interval
    from sandbox.analysis.stats import t_interval as student_t

    rng = np.random.default_rng(3)
    for x in (rng.random(4), rng.normal(size=9) * 1e3, np.array([0.0, 1.0, 1.0])):
        ref, iv = student_t(x), t_interval(x)
        assert (iv.estimate, iv.low, iv.high, iv.n) == (ref.estimate, ref.low, ref.high, ref.n)
        clipped = t_interval(x, bounds=(0.0, 1.0))
        assert (clipped.low, clipped.high) == (max(0.0, ref.low), min(1.0, ref.high))


def test_cell_interval_switches_to_the_bootstrap_at_ten_seeds():
    x = np.linspace(0.4, 0.6, 10)
    iv = cell_interval(x)
    assert iv.estimate == pytest.approx(0.5) and 0.4 < iv.low < 0.5 < iv.high < 0.6
    assert cell_interval(x[:9]) == t_interval(x[:9], bounds=(0.0, 1.0))


def test_probability_of_improvement_by_hand():
    # cell 1: X = {1, 2} vs Y = {0, 2}: pairs (1>0, 1<2, 2>0, 2=2) → (1 + 0 + 1 + 0.5)/4; cell 2: X always wins
    iv = probability_of_improvement([[1, 2], [5, 6]], [[0, 2], [1, 1]])
    assert iv.estimate == pytest.approx((2.5 / 4 + 1) / 2)
    assert iv.low <= iv.estimate <= iv.high
    assert probability_of_improvement([[1, 1]], [[1, 1]]).estimate == 0.5
    assert probability_of_improvement([[3, 4]], [[1, 2]]).low == 1.0


def test_aggregate_iqm_pools_cells_and_seeds():
    groups = [np.arange(4.0), np.arange(4.0, 8.0)]
    iv = aggregate_iqm(groups)
    assert iv.estimate == pytest.approx(iqm(np.arange(8.0))) and iv.n == 8
    assert iv.low < iv.estimate < iv.high


def test_stratified_bootstrap_resamples_within_each_cell():
    # each cell constant: any within-cell resample leaves every replicate unchanged
    reps = stratified_bootstrap([np.zeros(3), np.ones(5)], lambda gs: np.concatenate(gs, axis=1).mean(1), 50)
    assert np.allclose(reps, 5 / 8)


def test_null_false_pass_rate_of_improvement_claims():
    """Two methods with the same score distribution in every cell: a claim 'X differs from Y'
    (the 95% interval of P(X > Y) excludes ½) must be made at most at the nominal 5%, up to the
    Monte Carlo error of the check (3 standard errors)."""
    rng = np.random.default_rng(0)
    replicates, claims = 300, 0
    for r in range(replicates):
        means = rng.uniform(0.2, 0.8, 6)
        x = [np.clip(rng.normal(m, 0.15, 5), 0, 1) for m in means]
        y = [np.clip(rng.normal(m, 0.15, 5), 0, 1) for m in means]
        iv = probability_of_improvement(x, y, n_resamples=400, seed=r)
        claims += iv.low > 0.5 or iv.high < 0.5
    bound = 0.05 + 3 * np.sqrt(0.05 * 0.95 / replicates)
    assert claims / replicates <= bound, f"false-pass rate {claims / replicates:.3f} above {bound:.3f}"


def test_cell_interval_covers_the_mean_at_the_nominal_level_at_few_seeds():
    """Null false-pass rate of a per-cell claim 'the mean is not μ' at 4 seeds: the t-interval's
    coverage is 95% for normal scores; the check allows 3 Monte Carlo standard errors."""
    rng = np.random.default_rng(1)
    replicates = 4000
    data = rng.normal(0.5, 0.1, (replicates, 4))
    misses = sum(not (iv.low <= 0.5 <= iv.high) for iv in map(cell_interval, data))
    assert misses / replicates <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / replicates)
    assert misses / replicates >= 0.05 - 3 * np.sqrt(0.05 * 0.95 / replicates)  # and not needlessly wide


@pytest.mark.parametrize("call, message", [
    (lambda: t_interval([]), "non-empty"),
    (lambda: cell_interval([0.1, np.nan]), "diverged run must enter as its worst score"),
    (lambda: probability_of_improvement([[1.0]], [[1.0], [2.0]]), "one array per cell"),
    (lambda: aggregate_iqm([[1.0]], confidence=1.5), "confidence must be in"),
    (lambda: stratified_bootstrap([[1.0]], np.mean, n_resamples=0), "n_resamples must be"),
])
def test_bad_input_is_a_one_line_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
