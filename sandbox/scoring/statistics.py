"""Scorecard statistics (Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice",
the rliable methods), on numpy/scipy and ``sandbox.analysis.stats``.

- per cell: the mean score with a Student-t interval below 10 seeds (exact for normal scores at
  any n), a BCa bootstrap interval from 10 seeds on; both clipped to the score's range [0, 1];
- aggregate: the interquartile mean over all cells and seeds, with a stratified bootstrap interval
  (seeds resampled within each cell);
- probability of improvement P(X > Y) = mean over cells of P(X_c > Y_c) + ½·P(X_c = Y_c) (the
  Mann–Whitney statistic U/(n·m) per cell), with a stratified bootstrap interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sandbox.analysis.stats import Interval, bootstrap_ci, iqm
from sandbox.analysis.stats import t_interval as student_t

T_BELOW = 10  # seeds below which a cell's interval is Student-t


def _groups(name: str, groups: Sequence) -> list[np.ndarray]:
    out = [np.asarray(g, dtype=float).ravel() for g in groups]
    if not out or any(g.size == 0 for g in out):
        raise ValueError(f"{name} must be a non-empty list of non-empty score arrays (one per cell)")
    if any(np.isnan(g).any() for g in out):
        raise ValueError(f"{name} contains NaN: a diverged run must enter as its worst score (0), not NaN")
    return out


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def t_interval(x, confidence: float = 0.95, bounds: tuple[float, float] = (-np.inf, np.inf)) -> Interval:
    """mean ± t_{n−1, (1+c)/2}·s/√n (``sandbox.analysis.stats.t_interval``), clipped to ``bounds``;
    one value gives the whole range."""
    _check_confidence(confidence)
    (data,) = _groups("x", [x])
    mean = float(data.mean())
    if data.size == 1:
        return Interval(mean, bounds[0], bounds[1], confidence, 1)
    iv = student_t(data, confidence)
    return Interval(iv.estimate, float(max(bounds[0], iv.low)), float(min(bounds[1], iv.high)), confidence,
                    int(data.size))


def cell_interval(x, confidence: float = 0.95, bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """The mean score of one cell with an interval valid at its seed count: t below ``T_BELOW``
    seeds, BCa bootstrap (``sandbox.analysis.stats.bootstrap_ci``) from there on."""
    (data,) = _groups("x", [x])
    if data.size < T_BELOW:
        return t_interval(data, confidence, bounds)
    iv = bootstrap_ci(data, "mean", confidence)
    return Interval(iv.estimate, max(bounds[0], iv.low), min(bounds[1], iv.high), confidence, iv.n)


def stratified_bootstrap(groups: Sequence, statistic: Callable[[list[np.ndarray]], np.ndarray],
                         n_resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """Replicates ``[n_resamples]`` of ``statistic`` applied to resampled groups: each group (a
    cell) resampled with replacement within itself; ``statistic`` takes a list of ``[R, n_c]``
    arrays and returns ``[R]``."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be ≥ 1, got {n_resamples}")
    groups = _groups("groups", groups)
    rng = np.random.default_rng(seed)
    return statistic([g[rng.integers(0, g.size, size=(n_resamples, g.size))] for g in groups])


def _percentile(estimate: float, replicates: np.ndarray, confidence: float, n: int) -> Interval:
    low, high = np.quantile(replicates, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(float(estimate), float(low), float(high), confidence, n)


def aggregate_iqm(groups: Sequence, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """IQM of all scores pooled over cells and seeds, with a stratified bootstrap interval."""
    _check_confidence(confidence)
    groups = _groups("groups", groups)
    reps = stratified_bootstrap(groups, lambda gs: iqm(np.concatenate(gs, axis=1), axis=1), n_resamples, seed)
    return _percentile(float(iqm(np.concatenate(groups))), reps, confidence, sum(g.size for g in groups))


def _poi(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """Mean over cells of P(X > Y) + ½·P(X = Y); arrays ``[..., n]``, result ``[...]``."""
    per_cell = []
    for x, y in zip(xs, ys):
        diff = x[..., :, None] - y[..., None, :]
        per_cell.append((diff > 0).mean(axis=(-2, -1)) + 0.5 * (diff == 0).mean(axis=(-2, -1)))
    return np.mean(per_cell, axis=0)


def probability_of_improvement(x_groups: Sequence, y_groups: Sequence, confidence: float = 0.95,
                               n_resamples: int = 2000, seed: int = 0) -> Interval:
    """P(X > Y) averaged over cells (X's and Y's scores per cell, in the same cell order), with a
    stratified bootstrap interval (X and Y resampled independently within each cell)."""
    _check_confidence(confidence)
    xs, ys = _groups("x_groups", x_groups), _groups("y_groups", y_groups)
    if len(xs) != len(ys):
        raise ValueError(f"x_groups and y_groups must have one array per cell each, got {len(xs)} and {len(ys)}")
    k = len(xs)
    reps = stratified_bootstrap(xs + ys, lambda gs: _poi(gs[:k], gs[k:]), n_resamples, seed)
    return _percentile(float(_poi(xs, ys)), reps, confidence, sum(x.size for x in xs))
