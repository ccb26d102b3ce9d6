"""Statistics over seeds, on ``scipy.stats``: bootstrap confidence intervals, the interquartile
mean (rliable's recommendation over mean ± std of few seeds), paired differences."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    n: int = 0

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


def iqm(x, axis: int = 0) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% (scipy.stats.trim_mean, 25% cut each side)."""
    return stats.trim_mean(np.asarray(x, dtype=float), 0.25, axis=axis)


def _statistic(name: str | Callable) -> Callable:
    if callable(name):
        return name
    table = {"mean": np.mean, "median": np.median, "iqm": lambda x, axis=0: iqm(x, axis=axis)}
    if name not in table:
        raise ValueError(f"statistic must be one of {sorted(table)} or a callable, got {name!r}")
    return table[name]


def bootstrap_ci(x, statistic: str | Callable = "mean", confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> Interval:
    """Bootstrap CI of ``statistic`` over the samples ``x`` (scipy.stats.bootstrap, BCa; the
    percentile method when BCa is degenerate, e.g. for constant data). NaNs are dropped."""
    data = np.asarray(x, dtype=float).ravel()
    data = data[~np.isnan(data)]
    if data.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    fn = _statistic(statistic)
    estimate = float(fn(data, axis=0))
    if data.size == 1 or np.all(data == data[0]):
        return Interval(estimate, estimate, estimate, confidence, int(data.size))
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = stats.bootstrap((data,), fn, confidence_level=confidence, n_resamples=n_resamples,
                                  method="BCa", random_state=rng, vectorized=True, axis=0)
            low, high = res.confidence_interval
            if not (np.isfinite(low) and np.isfinite(high)):
                raise FloatingPointError
        except (FloatingPointError, ValueError):
            res = stats.bootstrap((data,), fn, confidence_level=confidence, n_resamples=n_resamples,
                                  method="percentile", random_state=np.random.default_rng(seed),
                                  vectorized=True, axis=0)
            low, high = res.confidence_interval
    return Interval(estimate, float(low), float(high), confidence, int(data.size))


def paired_difference_ci(a, b, statistic: str | Callable = "mean", confidence: float = 0.95,
                         n_resamples: int = 2000, seed: int = 0) -> Interval:
    """CI of statistic(a − b) over paired samples (same seeds): the comparison that removes
    seed-to-seed variation shared by both methods. Pairs with a NaN are dropped."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
    return bootstrap_ci(a - b, statistic, confidence, n_resamples, seed)


def mean_ci_over_seeds(values: np.ndarray, confidence: float = 0.95, n_resamples: int = 1000,
                       statistic: str = "mean", seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column (e.g. per step) of ``values [n_seeds, n_points]``: (estimate, low, high); NaNs are
    dropped, and an all-NaN column gives NaN."""
    values = np.asarray(values, dtype=float)
    est, lo, hi = [], [], []
    for column in values.T:
        if np.isnan(column).all():  # nothing measured at this point (e.g. masked after convergence)
            est.append(np.nan)
            lo.append(np.nan)
            hi.append(np.nan)
            continue
        iv = bootstrap_ci(column, statistic, confidence, n_resamples, seed)
        est.append(iv.estimate)
        lo.append(iv.low)
        hi.append(iv.high)
    return np.array(est), np.array(lo), np.array(hi)
