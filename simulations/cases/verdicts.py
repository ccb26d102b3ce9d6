"""The decision rules of the case file, executable: one case's runs at one scale → agree / opposite
/ not-reproduced / inconclusive (the file's ``mapping.verdicts`` and ``mapping.statistics``,
declared before any run; docs/predictions.md, "Decision rules").

``judge(case, frames, budget)`` takes one results frame per arm (``sandbox.runtime.loop.train``'s
rows of every seed of that arm at one scale: columns ``step``, ``seed``, ``member``, the metric and
the signals) and the budget the runs were given. A diverged seed is worst (error 1.0) from its first
NaN, and a seed that stopped before the budget is worst there (``sandbox.analysis.collapse``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from sandbox.analysis.collapse import collapse_event, prosperity_before_collapse

WORST = 1.0  # the error of a diverged seed
#: fewer collapsed seeds than this and a signal statistic has nothing to test: not reproduced
MIN_COLLAPSED = 3
VERDICTS = ("agree", "opposite", "not-reproduced", "inconclusive")


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

    def collapsed(arm: str) -> list[bool]:
        return [collapse_event(s, v, budget=budget).collapsed for s, v, _ in curves[arm].values()]

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
        seeds = sorted(set(curves[d["arm"]]) & set(control))
        diff = np.array([_final(*curves[d["arm"]][k][:2], budget) - _final(*control[k][:2], budget) for k in seeds])
        gain = np.mean([control[k][1][0] - _final(*control[k][:2], budget) for k in seeds])
        delta = 0.2 * gain
        half = stats.t.ppf(1 - alpha, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff))
        upper, lower = diff.mean() + half, diff.mean() - half
        verdict = "agree" if upper < delta else "opposite" if lower > delta else "not-reproduced"
        return Verdict(verdict, statistic, detail={"difference": diff.tolist(), "delta": delta,
                                                   "bounds": (float(lower), float(upper))})
    signal = d["signal"]
    if statistic == "signal_level":
        seeds = sorted(set(curves[d["worse"]]) & set(control))

        def late(rows: pd.DataFrame) -> float:
            return float(np.nanmean(rows.loc[rows["step"] >= budget / 2, signal].to_numpy(dtype=float)))

        diff = np.array([late(curves[d["worse"]][k][2]) - late(control[k][2]) for k in seeds])
        return _decide(statistic, *_t(diff[np.isfinite(diff)]), alpha, {"difference": diff.tolist()})
    # signal_rise
    x = []
    for s, v, rows in curves[d["worse"]].values():
        e = collapse_event(s, v, budget=budget)
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


__all__ = ["MIN_COLLAPSED", "VERDICTS", "WORST", "Verdict", "judge"]
