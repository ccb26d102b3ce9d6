"""Intervals over seeds that hold at the seed counts the sandbox runs (3–100).

* A mean, and the mean of paired differences (same seeds): the Student-t interval
  x̄ ± t_{n−1, (1+c)/2}·s/√n — exact for normal data at every n ≥ 2, asymptotically valid otherwise.
  The bootstrap it replaces under-covers at small n: under no true difference a one-sided 2.5% claim
  passed 12.8% of the time at 3 seeds, 8.8% at 4 and 7.0% at 5 (BCa, resampling only n values).
* Two unpaired means: Welch's t-interval (Welch 1947), x̄_a − x̄_b ± t_ν·√(s_a²/n_a + s_b²/n_b)
  with the Welch–Satterthwaite ν.
* The median: the distribution-free order-statistic interval [x_(k), x_(n+1−k)], k the largest
  with P(Binomial(n, ½) < k) ≤ (1 − c)/2 — exact for any continuous distribution at any n (bimodal
  and skewed metrics too); at n < 6 no such k exists for c = 0.95 and the bounds are the data's
  range, flagged in ``method``.
* Other statistics (the interquartile mean, rliable's recommendation for aggregates — Agarwal et al.
  2021): the BCa bootstrap (scipy.stats.bootstrap), only over at least ``BOOTSTRAP_MIN_N`` values;
  below that it is refused rather than trusted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from sandbox.core.validation import check_range

#: fewest values a bootstrap interval is computed from; below it only means get an interval (t)
BOOTSTRAP_MIN_N = 20


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval (floats, or arrays from the vectorised functions)."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    n: int = 0
    method: str = ""

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


def iqm(x, axis: int = 0) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% (scipy.stats.trim_mean, 25% cut each side)."""
    from scipy import stats  # here, not at import: scipy.stats costs ≈ 0.4 s of a run's start-up
    return stats.trim_mean(np.asarray(x, dtype=float), 0.25, axis=axis)


def _statistic(name: str | Callable) -> Callable:
    if callable(name):
        return name
    table = {"mean": np.mean, "median": np.median, "iqm": lambda x, axis=0: iqm(x, axis=axis)}
    if name not in table:
        raise ValueError(f"statistic must be one of {sorted(table)} or a callable, got {name!r}")
    return table[name]


def _confidence(confidence: float) -> float:
    check_range("confidence", float(confidence), low=0.0, high=1.0, low_open=True, high_open=True)
    return float(confidence)


def t_interval(x, confidence: float = 0.95, axis: int = -1) -> Interval:
    """Student-t interval of the mean along ``axis``, x̄ ± t_{n−1}·s/√n, vectorised over the other
    axes. NaNs are ignored (n counts the rest); with n < 2 the bounds are NaN (no interval exists)."""
    c = _confidence(confidence)
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[axis] == 0:
        raise ValueError(f"t_interval needs at least one value along axis {axis}, got shape {x.shape}")
    n = np.sum(~np.isnan(x), axis=axis)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as documented
        mean = np.nanmean(x, axis=axis)
        half = special.stdtrit(n - 1, (1 + c) / 2) * np.nanstd(x, axis=axis, ddof=1) / np.sqrt(n)
    half = np.where(n >= 2, half, np.nan)
    return _wrap(mean, mean - half, mean + half, c, n, "t")


def welch_interval(a, b, confidence: float = 0.95, axis: int = -1) -> Interval:
    """Welch's t-interval of mean(a) − mean(b) for independent samples along ``axis`` (vectorised);
    ν = (v_a + v_b)² / (v_a²/(n_a − 1) + v_b²/(n_b − 1)), v = s²/n. Needs 2+ values per sample."""
    c = _confidence(confidence)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = a.shape[axis], b.shape[axis]
    if na < 2 or nb < 2:
        raise ValueError(f"welch_interval needs at least 2 values in each sample, got {na} and {nb}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("welch_interval: a and b must not contain NaN (decide how diverged seeds count first)")
    va, vb = a.var(axis=axis, ddof=1) / na, b.var(axis=axis, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
        half = np.where(se > 0, special.stdtrit(np.where(se > 0, df, 1.0), (1 + c) / 2) * se, 0.0)
    diff = a.mean(axis=axis) - b.mean(axis=axis)
    return _wrap(diff, diff - half, diff + half, c, min(na, nb), "Welch t")


def _wrap(estimate, low, high, confidence, n, method) -> Interval:
    if np.ndim(estimate) == 0:
        return Interval(float(estimate), float(low), float(high), confidence, int(n), method)
    return Interval(estimate, low, high, confidence, n, method)


def bootstrap_ci(x, statistic: str | Callable = "mean", confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> Interval:
    """Bootstrap CI of ``statistic`` over the samples ``x`` (scipy.stats.bootstrap, BCa; the
    percentile method when BCa is degenerate, e.g. for constant data). NaNs are dropped.

    For aggregates over many values; at a few seeds it under-covers — use ``interval`` instead."""
    c = _confidence(confidence)
    check_range("n_resamples", n_resamples, low=1)
    data = np.asarray(x, dtype=float).ravel()
    data = data[~np.isnan(data)]
    if data.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    fn = _statistic(statistic)
    estimate = float(fn(data, axis=0))
    if data.size == 1 or np.all(data == data[0]):
        return Interval(estimate, estimate, estimate, c, int(data.size), "bootstrap")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, high = np.nan, np.nan
        for method in ("BCa", "percentile"):
            try:
                from scipy import stats  # here, not at import: scipy.stats costs ≈ 0.4 s of a run's start-up
                res = stats.bootstrap((data,), fn, confidence_level=c, n_resamples=n_resamples, method=method,
                                      random_state=np.random.default_rng(seed), vectorized=True, axis=0)
            except (FloatingPointError, ValueError):
                continue
            low, high = res.confidence_interval
            if np.isfinite(low) and np.isfinite(high):
                break
    return Interval(estimate, float(low), float(high), c, int(data.size), f"bootstrap ({method})")


def median_interval(x, confidence: float = 0.95) -> Interval:
    """The median with its order-statistic interval (module docstring): exact, distribution-free."""
    c = _confidence(confidence)
    data = np.sort(np.asarray(x, dtype=float).ravel())
    if data.size == 0 or np.isnan(data).any():
        raise ValueError("median_interval needs non-empty data free of NaN")
    n = data.size
    from scipy import stats  # here, not at import: scipy.stats costs ≈ 0.4 s of a run's start-up
    k = int(stats.binom.ppf((1 - c) / 2, n, 0.5))  # P(B < k) ≤ (1 − c)/2 for this k …
    while k > 0 and stats.binom.cdf(k - 1, n, 0.5) > (1 - c) / 2:  # … checked exactly
        k -= 1
    if k == 0:
        return Interval(float(np.median(data)), float(data[0]), float(data[-1]), c, n,
                        f"order statistics: n = {n} is too few for a {c:.0%} interval (the data's range)")
    coverage = 1 - 2 * stats.binom.cdf(k - 1, n, 0.5)
    return Interval(float(np.median(data)), float(data[k - 1]), float(data[n - k]), c, n,
                    f"order statistics x_({k})…x_({n + 1 - k}), coverage {coverage:.3f}")


def interval(x, statistic: str | Callable = "mean", confidence: float = 0.95, seed: int = 0,
             n_resamples: int = 2000) -> Interval:
    """The interval for ``statistic`` over seeds: t for the mean (any n ≥ 2), the order-statistic
    interval for the median (any n), BCa bootstrap for any other statistic over at least
    ``BOOTSTRAP_MIN_N`` values. ``x`` must be free of NaN."""
    data = np.asarray(x, dtype=float).ravel()
    if data.size == 0 or np.isnan(data).any():
        raise ValueError(f"x must be non-empty and free of NaN, got {data.size} values with "
                         f"{int(np.isnan(data).sum())} NaN (decide how diverged seeds count first)")
    _statistic(statistic)
    if statistic == "mean":
        return t_interval(data, confidence)
    if statistic == "median":
        return median_interval(data, confidence)
    if data.size < BOOTSTRAP_MIN_N:
        raise ValueError(f"statistic {statistic!r} needs at least {BOOTSTRAP_MIN_N} values for a bootstrap interval, "
                         f"got {data.size}; use statistic='mean' (t-interval) at this seed count")
    return bootstrap_ci(data, statistic, confidence, n_resamples, seed)


def paired_difference_ci(a, b, statistic: str | Callable = "mean", confidence: float = 0.95,
                         n_resamples: int = 2000, seed: int = 0) -> Interval:
    """CI of statistic(a − b) over paired samples (same seeds): the comparison that removes
    seed-to-seed variation shared by both methods; the t-interval for the mean (see ``interval``)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
    return interval(a - b, statistic, confidence, seed, n_resamples)


def difference_interval(a, b, paired: bool = True, statistic: str | Callable = "mean",
                        confidence: float = 0.95, seed: int = 0) -> Interval:
    """CI of statistic(a) − statistic(b): paired (t on a − b) or unpaired (Welch for the mean; a
    two-sample BCa bootstrap for other statistics over ≥ ``BOOTSTRAP_MIN_N`` values each)."""
    if paired:
        return paired_difference_ci(a, b, statistic, confidence, seed=seed)
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    fn = _statistic(statistic)
    if statistic == "mean":
        return welch_interval(a, b, confidence)
    if min(a.size, b.size) < BOOTSTRAP_MIN_N or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(f"unpaired {statistic!r} needs ≥ {BOOTSTRAP_MIN_N} non-NaN values per sample, "
                         f"got {a.size} and {b.size}; use statistic='mean' (Welch t-interval)")
    from scipy import stats  # here, not at import: scipy.stats costs ≈ 0.4 s of a run's start-up
    res = stats.bootstrap((a, b), lambda x, y, axis=-1: fn(x, axis=axis) - fn(y, axis=axis), paired=False,
                          vectorized=True, confidence_level=_confidence(confidence), method="BCa",
                          random_state=np.random.default_rng(seed))
    low, high = res.confidence_interval
    return Interval(float(fn(a) - fn(b)), float(low), float(high), confidence, min(a.size, b.size), "bootstrap (BCa)")


def mean_ci_over_seeds(values: np.ndarray, confidence: float = 0.95, n_resamples: int = 1000,
                       statistic: str = "mean", seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column (e.g. per step) of ``values [n_seeds, n_points]``: (estimate, low, high). NaNs are
    dropped (n counts the rest); a column with fewer than 2 values has NaN bounds. The mean gets
    t-intervals (vectorised); another statistic a bootstrap per column (needs ``BOOTSTRAP_MIN_N`` seeds)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be 2-D [n_seeds, n_points], got shape {values.shape}")
    if statistic == "mean":
        iv = t_interval(values, confidence, axis=0)
        return np.asarray(iv.estimate), np.asarray(iv.low), np.asarray(iv.high)
    _statistic(statistic)
    if values.shape[0] < BOOTSTRAP_MIN_N:
        raise ValueError(f"statistic {statistic!r} needs at least {BOOTSTRAP_MIN_N} seeds for bootstrap bands, "
                         f"got {values.shape[0]}; use statistic='mean'")
    est, lo, hi = (np.full(values.shape[1], np.nan) for _ in range(3))
    for j, column in enumerate(values.T):
        if not np.isnan(column).all():  # an all-NaN column: nothing measured there (e.g. masked)
            iv = bootstrap_ci(column, statistic, confidence, n_resamples, seed)
            est[j], lo[j], hi[j] = iv.estimate, iv.low, iv.high
    return est, lo, hi
