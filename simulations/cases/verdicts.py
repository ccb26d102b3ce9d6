"""The decision rules of the case file, executable: one case's runs at one scale → agree / opposite
/ not-reproduced / inconclusive (the file's ``mapping.verdicts`` and ``mapping.statistics``,
declared before any run; docs/predictions.md, "Decision rules").

``judge(case, frames, budget)`` takes one results frame per arm (``sandbox.runtime.loop.train``'s
rows of every seed of that arm at one scale: columns ``step``, ``seed``, ``member``, the metric and
the signals) and the budget the runs were given. A diverged seed is worst (error 1.0) from its first
NaN, and a seed that stopped before the budget is worst there (``sandbox.analysis.collapse``).

The second amendment's keys and statistics (the file's ``amendments[0].statistics``) are executed here
too: ``event: dip`` (a transient collapse), ``against``/``direction``/``min_live`` of
``signal_level``, ``plain`` of ``noninferior`` (→ "does-not-discriminate"), ``signal_trend`` and
``signal_lead``. First-round decisions set none of them and are judged exactly as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from sandbox.analysis.collapse import (
    COLLAPSE_FRACTION,
    LEARNED_FRACTION,
    CollapseEvent,
    collapse_event,
    prosperity_before_collapse,
)

WORST = 1.0  # the error of a diverged seed
#: fewer collapsed seeds than this and a signal statistic has nothing to test: not reproduced
MIN_COLLAPSED = 3
VERDICTS = ("agree", "opposite", "not-reproduced", "inconclusive", "does-not-discriminate")


@dataclass(frozen=True)
class Verdict:
    """A case's verdict at one scale, the two one-sided p-values (forward: the published direction)
    and the per-seed numbers the test read."""

    verdict: str
    statistic: str
    p_forward: float = math.nan
    p_reverse: float = math.nan
    detail: dict = field(default_factory=dict)


def _curves(frame: pd.DataFrame, metric: str) -> dict[int, tuple[np.ndarray, np.ndarray, pd.DataFrame]]:
    out = {}
    for seed, rows in frame.sort_values("step").groupby("seed", sort=True):
        out[int(seed)] = (rows["step"].to_numpy(), rows[metric].to_numpy(dtype=float), rows)
    return out


def _final(steps: np.ndarray, values: np.ndarray, budget: int) -> float:
    return WORST if steps[-1] < budget or not np.isfinite(values[-1]) else float(values[-1])


def dip_event(steps, values, budget: int) -> CollapseEvent:
    """The first logged step at which the run has learned (``LEARNED_FRACTION`` of the way to 0)
    and has lost ≥ ``COLLAPSE_FRACTION`` of its gain, whether or not it regains it (the second
    amendment's ``event: dip``); NaN and an early stop count as worst, as for a collapse."""
    s, v = np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=float)
    if budget > s[-1]:
        s, v = np.append(s, budget), np.append(v, np.nan)
    v = np.where(np.isnan(v), np.inf, v)
    best = np.minimum.accumulate(v)
    gain = v[0] - best
    learned = gain >= LEARNED_FRACTION * v[0] if v[0] > 0 else np.zeros_like(gain, dtype=bool)
    if not learned.any():
        return CollapseEvent(False, None, None, None)
    learned_step = int(s[np.argmax(learned)])
    for t in np.flatnonzero(learned):
        if v[t] - best[t] >= COLLAPSE_FRACTION * gain[t]:
            return CollapseEvent(True, learned_step, int(s[int(np.flatnonzero(v[: t + 1] == best[t])[0])]), int(s[t]))
    return CollapseEvent(True, learned_step, int(s[int(np.argmin(v))]), None)


def event_of(steps, values, budget: int, kind: str = "collapse") -> CollapseEvent:
    """The decision's event: the collapse of ``sandbox.analysis.collapse`` or a ``dip``."""
    return dip_event(steps, values, budget) if kind == "dip" else collapse_event(steps, values, budget=budget)


def _decide(statistic: str, p_forward: float, p_reverse: float, alpha: float, detail: dict) -> Verdict:
    if p_forward < alpha:
        return Verdict("agree", statistic, p_forward, p_reverse, detail)
    if p_reverse < alpha:
        return Verdict("opposite", statistic, p_forward, p_reverse, detail)
    return Verdict("not-reproduced", statistic, p_forward, p_reverse, detail)


def _fisher(bad_worse: list[bool], bad_better: list[bool]) -> tuple[float, float]:
    table = [[sum(bad_worse), len(bad_worse) - sum(bad_worse)], [sum(bad_better), len(bad_better) - sum(bad_better)]]
    return (float(stats.fisher_exact(table, alternative="greater").pvalue),
            float(stats.fisher_exact(table, alternative="less").pvalue))


def _t(x: np.ndarray, mu: float = 0.0) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):
        return math.nan, math.nan
    return (float(stats.ttest_1samp(x, mu, alternative="greater").pvalue),
            float(stats.ttest_1samp(x, mu, alternative="less").pvalue))


def judge(case, frames: dict[str, pd.DataFrame], budget: int, metric: str = "error", alpha: float = 0.05) -> Verdict:
    """The verdict of ``case`` (a ``simulations.cases.Case``) on ``frames`` {arm: results frame}."""
    d = case.decision
    statistic = d["statistic"]
    curves = {arm: _curves(frame, metric) for arm, frame in frames.items()}
    control = curves["control"]
    events = {seed: collapse_event(s, v, budget=budget) for seed, (s, v, _) in control.items()}
    learned = np.mean([e.learned for e in events.values()])
    if learned < 0.75 or any(e.collapsed for e in events.values()):
        return Verdict("inconclusive", statistic, detail={"control_learned": float(learned),
                                                          "control_collapsed": sum(e.collapsed for e in events.values())})

    kind = d.get("event", "collapse")

    def collapsed(arm: str) -> list[bool]:
        return [event_of(s, v, budget, kind).collapsed for s, v, _ in curves[arm].values()]

    if statistic == "collapse_contrast":
        worse, better = collapsed(d["worse"]), collapsed(d["better"])
        return _decide(statistic, *_fisher(worse, better), alpha, {"worse": worse, "better": better})
    if statistic == "prosperity_contrast":
        shape = {arm: [prosperity_before_collapse(s, v, *control[seed][:2], budget=budget)
                       for seed, (s, v, _) in curves[arm].items()] for arm in (d["worse"], d["better"])}
        return _decide(statistic, *_fisher(shape[d["worse"]], shape[d["better"]]), alpha, shape)
    if statistic == "final_contrast":
        seeds = sorted(set(curves[d["worse"]]) & set(curves[d["better"]]))
        diff = np.array([_final(*curves[d["worse"]][k][:2], budget) - _final(*curves[d["better"]][k][:2], budget)
                         for k in seeds])
        return _decide(statistic, *_t(diff), alpha, {"difference": diff.tolist()})
    if statistic == "noninferior":
        verdict, detail = _noninferior(curves[d["arm"]], control, budget, alpha)
        if "plain" in d:
            plain, plain_detail = _noninferior(curves[d["plain"]], control, budget, alpha)
            detail["plain"] = {"verdict": plain, **plain_detail}
            if verdict == "agree" and plain == "agree":
                verdict = "does-not-discriminate"
        return Verdict(verdict, statistic, detail=detail)
    signal = d["signal"]
    if statistic == "signal_level":
        return _signal_level(d, curves, budget, alpha)
    if statistic == "signal_trend":
        return _signal_trend(d, curves[d["worse"]], budget, alpha)
    if statistic == "signal_lead":
        return _signal_lead(d, curves[d["worse"]], budget, alpha)
    # signal_rise
    x = []
    for s, v, rows in curves[d["worse"]].values():
        e = event_of(s, v, budget, d.get("event", "collapse"))
        if not e.collapsed:
            continue
        before = rows[rows["step"] < e.collapse_step]
        ref = rows.loc[rows["step"] == e.learned_step, signal]
        if before.empty or ref.empty:
            continue
        a, b = float(ref.iloc[0]), float(before[signal].iloc[-1])
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            continue  # the log ratio is undefined: the seed is left out
        x.append(math.log10(b / a) * (1 if d["direction"] == "up" else -1))
    if len(x) < MIN_COLLAPSED:
        return Verdict("not-reproduced", statistic, detail={"log10_rise": x, "collapsed_seeds": len(x)})
    return _decide(statistic, *_t(np.array(x), math.log10(d["factor"])), alpha, {"log10_rise": x})


def _noninferior(arm: dict, control: dict, budget: int, alpha: float) -> tuple[str, dict]:
    """Final error of ``arm`` minus the control's, paired by seed, against δ = 0.2 × the control's
    mean gain: agree below δ, opposite above it (one-sided t-bounds), else not-reproduced."""
    seeds = sorted(set(arm) & set(control))
    diff = np.array([_final(*arm[k][:2], budget) - _final(*control[k][:2], budget) for k in seeds])
    delta = 0.2 * np.mean([control[k][1][0] - _final(*control[k][:2], budget) for k in seeds])
    half = stats.t.ppf(1 - alpha, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff))
    upper, lower = diff.mean() + half, diff.mean() - half
    verdict = "agree" if upper < delta else "opposite" if lower > delta else "not-reproduced"
    return verdict, {"difference": diff.tolist(), "delta": delta, "bounds": (float(lower), float(upper))}


def _signal_level(d: dict, curves: dict, budget: int, alpha: float) -> Verdict:
    """Second-half mean of the signal, ``worse`` − ``against`` (default: the control) paired by
    seed; ``direction: down`` tests that it is lower; ``min_live`` counts only steps with a non-zero
    gradient and leaves out a seed with fewer than that share of them (< 3 pairs: inconclusive)."""
    signal, live_share = d["signal"], d.get("min_live")
    worse, against = curves[d["worse"]], curves[d.get("against", "control")]

    def late(rows: pd.DataFrame) -> float:
        rows = rows.loc[rows["step"] >= budget / 2]
        if live_share is not None:
            live = rows["grad_norm"].to_numpy(dtype=float) > 0
            if live.size == 0 or live.mean() < live_share:
                return math.nan
            rows = rows.loc[live]
        return float(np.nanmean(rows[signal].to_numpy(dtype=float)))

    seeds = sorted(set(worse) & set(against))
    diff = np.array([late(worse[k][2]) - late(against[k][2]) for k in seeds])
    finite = diff[np.isfinite(diff)]
    if live_share is not None and finite.size < MIN_COLLAPSED:
        return Verdict("inconclusive", "signal_level", detail={"difference": diff.tolist(), "frozen": True,
                                                               "pairs": int(finite.size)})
    up, down = _t(finite)
    forward, reverse = (down, up) if d.get("direction", "up") == "down" else (up, down)
    return _decide("signal_level", forward, reverse, alpha, {"difference": diff.tolist()})


def _signal_trend(d: dict, worse: dict, budget: int, alpha: float) -> Verdict:
    """x = log10(mean signal over the last quarter of the budget / its minimum before), per seed;
    one-sided t that mean x > log10(factor)."""
    x = []
    for _s, _v, rows in worse.values():
        last = rows.loc[rows["step"] >= 0.75 * budget, d["signal"]].to_numpy(dtype=float)
        before = rows.loc[rows["step"] < 0.75 * budget, d["signal"]].to_numpy(dtype=float)
        low, end = (np.nanmin(before) if before.size else math.nan), (np.nanmean(last) if last.size else math.nan)
        if low > 0 and end > 0 and math.isfinite(low) and math.isfinite(end):
            x.append(math.log10(end / low))
    if len(x) < MIN_COLLAPSED:
        return Verdict("not-reproduced", "signal_trend", detail={"log10_rise": x})
    return _decide("signal_trend", *_t(np.array(x), math.log10(d["factor"])), alpha, {"log10_rise": x})


def _fired(window: pd.DataFrame, column: str, factor: float, event_step: int) -> float:
    """The first step of ``window`` at which ``column`` reached ``factor`` × its first value (the
    event's step if it never did; NaN if the first value is not positive)."""
    values = window[column].to_numpy(dtype=float)
    if values.size == 0 or not values[0] > 0:
        return math.nan
    hit = np.flatnonzero(values >= factor * values[0])
    return float(window["step"].iloc[hit[0]]) if hit.size else float(event_step)


def _signal_lead(d: dict, worse: dict, budget: int, alpha: float) -> Verdict:
    """Per seed with an event: the first logged step from the learned step on at which each signal
    reached ``factor`` × its learned-step value (the event's step if none did before it); lead =
    step(lagging) − step(signal); one-sided t that the mean lead > 0."""
    leads = []
    for s, v, rows in worse.values():
        e = event_of(s, v, budget, d.get("event", "collapse"))
        if not e.collapsed or e.learned_step is None:
            continue
        window = rows[(rows["step"] >= e.learned_step) & (rows["step"] <= e.collapse_step)]
        lead = (_fired(window, d["lagging"], d["factor"], e.collapse_step)
                - _fired(window, d["signal"], d["factor"], e.collapse_step))
        if math.isfinite(lead):
            leads.append(lead)
    if len(leads) < MIN_COLLAPSED:
        return Verdict("not-reproduced", "signal_lead", detail={"lead": leads})
    return _decide("signal_lead", *_t(np.array(leads)), alpha, {"lead": leads})


__all__ = ["MIN_COLLAPSED", "VERDICTS", "WORST", "Verdict", "dip_event", "event_of", "judge"]
