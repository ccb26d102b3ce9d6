"""Stability of a learning curve, per seed: peak, final, late mean and drawdown of one metric.

For a curve v_0 … v_T (logged steps in order) and "higher is better":
peak = max_t v_t, final = v_T, late = mean of v_t over the second half of training
(step ≥ last step / 2), drawdown = max_t (max_{s ≤ t} v_s − v_t), the largest fall from the best
value reached so far (0 for a curve that never falls). For a metric where lower is better (an
error) the roles flip: peak is the minimum and drawdown the largest rise above the best so far.
A collapse under staleness shows as a large drawdown with a peak that looked fine.

A diverged seed (NaN from some step on) keeps its NaN in final, late and drawdown, so that a claim
over seeds scores it as the metric's worst value instead of silently averaging over the others;
its peak is the best value it reached before diverging. ``seed_mean`` is the NaN-keeping per-seed
mean every aggregation between a run and a claim uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

COLUMNS = ("peak", "final", "late", "drawdown")


def seed_mean(frame: pd.DataFrame, column: str, by: Sequence[str]) -> pd.Series:
    """Mean of ``column`` per group of ``by`` (a seed), NaN where any of the group's values is NaN
    (a diverged seed stays diverged; pandas' own mean would skip its NaN)."""
    keys = [frame[b] for b in by]
    values = frame[column]
    return values.groupby(keys, sort=True).mean().where(~values.isna().groupby(keys, sort=True).any())


def drawdown(values: Sequence[float] | np.ndarray, higher_is_better: bool = True) -> float:
    """Largest fall from the best value reached so far (≥ 0); NaN if the curve holds a NaN (diverged)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1:
        raise ValueError(f"values must be one curve (1-D), got shape {v.shape}")
    if v.size == 0 or np.isnan(v).any():
        return float("nan")
    v = v if higher_is_better else -v
    return float(np.max(np.maximum.accumulate(v) - v))


def stability(frame: pd.DataFrame, metric: str, higher_is_better: bool = True,
              by: Sequence[str] = ("seed",), step: str = "step") -> pd.DataFrame:
    """One row per group of ``by`` (a seed, or a population member) with peak, final, late and
    drawdown of ``metric`` over ``step`` (see the module docstring)."""
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise ValueError("frame must be a non-empty pandas DataFrame")
    missing = [c for c in (metric, step, *by) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column(s) {missing}; columns: {sorted(frame.columns)}")
    ordered = frame.sort_values(step)
    half = ordered[step].max() / 2
    best = "max" if higher_is_better else "min"
    groups = ordered.groupby(list(by), sort=True)
    return pd.DataFrame({
        "peak": groups[metric].agg(best),
        "final": groups[metric].agg(lambda v: v.iloc[-1]),
        "late": seed_mean(ordered[ordered[step] >= half], metric, by),
        "drawdown": groups[metric].agg(lambda v: drawdown(v.to_numpy(), higher_is_better)),
    })


__all__ = ["COLUMNS", "drawdown", "seed_mean", "stability"]
