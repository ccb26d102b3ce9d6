"""Collapse as a measured event, and the "prosperity before collapse" shape, defined once.

For one run's curve v_0 … v_T of a metric on its logged steps (lower is better, as ``error``; a
higher-is-better metric is negated first) with a best possible value v* (0 for an error):

* best so far b_t = min_{u ≤ t} v_u, gain g_t = v_0 − b_t;
* the run **has learned** at t when g_t ≥ ``LEARNED_FRACTION`` · (v_0 − v*): it closed that
  fraction of the way from its start to perfect;
* it **collapses** at the first logged step t at which it has learned, has lost at least
  ``COLLAPSE_FRACTION`` of its gain, v_t − b_t ≥ ``COLLAPSE_FRACTION`` · g_t, and never recovers
  within the budget: every later logged value stays at that loss, v_u − b_t ≥ ``COLLAPSE_FRACTION``
  · g_t for all u ≥ t. A dip that comes back is not a collapse;
* a diverged run (a NaN value, the loop's mark of a member whose numbers became non-finite) counts
  as its worst value from its first NaN on, and a run that stopped before the budget's last step
  (``budget``) counts as worst over the steps it did not reach: neither recovers;
* **prosperity before collapse** (Zheng et al. 2025, arXiv 2510.01161, Fig. 1: a stale run that
  first learns like the on-policy one, then collapses): the run collapses, and at its best step
  before the collapse it had gained at least ``TRACK_FRACTION`` of what the on-policy control had
  gained by the same step.

The thresholds are modelling choices, stated here once (rationale beside each) and used by every
figure, claim and test; change them here or nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: a run has learned once it has closed 20% of the way from its start to perfect: 0.2 × a start
#: error of 0.5 is 0.1, over six standard errors of a sampled error on the default 1,000-row
#: evaluation batch (sd ≈ 0.016), and every on-policy control of the sandbox's figures passes it
#: at quick fidelity; below it a "collapse" could be evaluation noise around the start
LEARNED_FRACTION = 0.2
#: a collapse loses at least half of the gain made so far and keeps that loss to the end: a loss
#: that large cannot be sampling noise once the gain itself is ≥ LEARNED_FRACTION of the range,
#: and it is the size of the published collapses (reward or accuracy falling back near its start)
COLLAPSE_FRACTION = 0.5
#: "tracked the on-policy control": at its best step before the collapse the run had gained at
#: least 80% of the control's gain by that step (Zheng et al.'s stale runs match the on-policy
#: curve before collapsing; 80% leaves room for a stale run's slower start)
TRACK_FRACTION = 0.8


@dataclass(frozen=True)
class CollapseEvent:
    """One curve's reading: whether and when it learned, its best step before any collapse, and
    the collapse step (None when the run never collapsed within the budget)."""

    learned: bool
    learned_step: int | None
    peak_step: int | None
    collapse_step: int | None

    @property
    def collapsed(self) -> bool:
        return self.collapse_step is not None


def _curve(steps: Sequence[int], values: Sequence[float], budget: int | None) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    if s.ndim != 1 or v.ndim != 1 or s.shape != v.shape:
        raise ValueError(f"steps and values must be 1-D of one length, got shapes {s.shape} and {v.shape}")
    if s.size == 0:
        raise ValueError("a curve needs at least one logged step, got none")
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    if np.isnan(v[0]):
        raise ValueError("the curve's first value (its start) must be finite, got NaN")
    if budget is not None:
        if budget < s[-1]:
            raise ValueError(f"budget must be ≥ the last logged step {int(s[-1])}, got {budget}")
        if budget > s[-1]:  # stopped early: the unreached budget is the worst value, at the budget's end
            s, v = np.append(s, budget), np.append(v, np.nan)
    return s, np.where(np.isnan(v), np.inf, v)  # diverged from the first NaN on: worst


def collapse_event(steps: Sequence[int], values: Sequence[float], *, higher_is_better: bool = False,
                   best_possible: float | None = None, budget: int | None = None) -> CollapseEvent:
    """The module docstring's reading of one curve. ``best_possible`` is v* (default 0 for a
    lower-is-better metric; required when ``higher_is_better``); ``budget`` the step the run was
    meant to reach (default: its last logged step)."""
    if higher_is_better and best_possible is None:
        raise ValueError("best_possible is required for a higher-is-better metric (e.g. 1.0 for a reward in [0, 1])")
    perfect = 0.0 if best_possible is None else float(best_possible)
    s, v = _curve(steps, values, budget)
    if higher_is_better:
        v, perfect = -v, -perfect
        v = np.where(np.isinf(v), np.inf, v)  # a NaN is worst whichever the direction
    span = v[0] - perfect
    if span <= 0:  # starts at perfect (or beyond): nothing to learn, nothing to lose
        return CollapseEvent(False, None, None, None)
    best = np.minimum.accumulate(v)
    gain = v[0] - best
    learned = gain >= LEARNED_FRACTION * span
    learned_step = int(s[np.argmax(learned)]) if learned.any() else None
    for t in range(len(v)):
        if not learned[t] or v[t] - best[t] < COLLAPSE_FRACTION * gain[t]:
            continue
        if np.all(v[t:] - best[t] >= COLLAPSE_FRACTION * gain[t]):
            peak = int(np.flatnonzero(v[: t + 1] == best[t])[0])
            return CollapseEvent(True, learned_step, int(s[peak]), int(s[t]))
    peak = int(np.argmin(v)) if learned.any() else None
    return CollapseEvent(bool(learned.any()), learned_step, None if peak is None else int(s[peak]), None)


def collapse_step(steps: Sequence[int], values: Sequence[float], **kwargs) -> int | None:
    """The logged step of the collapse (``collapse_event``), or None."""
    return collapse_event(steps, values, **kwargs).collapse_step


def gain_at(steps: Sequence[int], values: Sequence[float], step: int, *, higher_is_better: bool = False) -> float:
    """v_0 − min_{u ≤ step} v_u: the curve's gain by ``step`` (its best so far; NaN counts as worst)."""
    s, v = _curve(steps, values, None)
    v = -v if higher_is_better else v
    v = np.where(np.isinf(v), np.inf, v)
    reached = s <= step
    return float(v[0] - np.min(v[reached]))


def prosperity_before_collapse(steps: Sequence[int], values: Sequence[float], control_steps: Sequence[int],
                               control_values: Sequence[float], **kwargs) -> bool:
    """Whether the run collapsed after tracking the on-policy control (module docstring): at its
    best step before the collapse its gain was ≥ ``TRACK_FRACTION`` × the control's gain by then.
    ``kwargs`` as ``collapse_event`` (the same for both curves, but the control's ``budget``)."""
    event = collapse_event(steps, values, **kwargs)
    if not event.collapsed:
        return False
    higher = kwargs.get("higher_is_better", False)
    run_gain = gain_at(steps, values, event.peak_step, higher_is_better=higher)
    control_gain = gain_at(control_steps, control_values, event.peak_step, higher_is_better=higher)
    return control_gain > 0 and run_gain >= TRACK_FRACTION * control_gain


def collapse_table(frame: pd.DataFrame, metric: str = "error", by: Sequence[str] = ("seed", "member"),
                   step: str = "step", budget: int | None = None, **kwargs) -> pd.DataFrame:
    """One row per run (group of ``by``) with ``learned``, ``learned_step``, ``peak_step`` and
    ``collapse_step`` (NaN where none) of ``metric`` over ``step``; ``budget`` defaults to the
    frame's largest step (a run that stopped before it never recovers)."""
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise ValueError("frame must be a non-empty pandas DataFrame")
    missing = [c for c in (metric, step, *by) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column(s) {missing}; columns: {sorted(frame.columns)}")
    budget = int(frame[step].max()) if budget is None else budget
    rows = {}
    for key, group in frame.sort_values(step).groupby(list(by), sort=True):
        e = collapse_event(group[step].to_numpy(), group[metric].to_numpy(), budget=budget, **kwargs)
        rows[key] = {"learned": e.learned, "learned_step": e.learned_step, "peak_step": e.peak_step,
                     "collapse_step": e.collapse_step}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=list(by)) if len(by) > 1 else \
        pd.Index([k[0] if isinstance(k, tuple) else k for k in table.index], name=by[0])
    return table


__all__ = ["COLLAPSE_FRACTION", "LEARNED_FRACTION", "TRACK_FRACTION", "CollapseEvent", "collapse_event",
           "collapse_step", "collapse_table", "gain_at", "prosperity_before_collapse"]
