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


def carried_to_budget(frame: pd.DataFrame) -> pd.DataFrame:
    """Every seed to the end of its run's budget: a member whose last logged row is diverged and that
    stops before the run's last logged step — a job whose every member diverged stops early, so its
    seeds have no row at the later steps — gets a row at each later step of the run's log schedule
    (``log_schedule(steps, log_points)``), a copy of its last row with the metrics that row holds as
    NaN kept NaN (``diverged`` True). ``final``, paired claims and curves then count it at its worst
    value instead of dropping it (n = 7, "0 diverged") or failing to pair it. Frames without the
    run's ``steps`` and ``log_points`` (closed forms, exact tables) are returned as they are."""
    from sandbox.runtime.loop import log_schedule

    needed = {"run_id", "member", "step", "diverged", "steps", "log_points"}
    if frame.empty or not needed <= set(frame.columns):
        return frame
    carried = []
    for _, run in frame.groupby(["run_id", "member"], sort=False):
        last = run.loc[run["step"].idxmax()]
        if not bool(last["diverged"]):
            continue
        later = [s for s in log_schedule(int(last["steps"]), int(last["log_points"])) if s > last["step"]]
        if later:
            rows = pd.DataFrame([last] * len(later)).assign(step=later)
            carried.append(rows.astype(frame.dtypes.to_dict(), errors="ignore"))
    if not carried:
        return frame
    return pd.concat([frame, *carried], ignore_index=True).sort_values(["run_id", "step", "member"], ignore_index=True)
