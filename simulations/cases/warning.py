"""Early warning, measured (figure ``early-warning``): does a logged signal, or a documented alarm,
say "collapse within the next N steps" before it happens?

Units. A **run** is one seed of one configuration (its job and population member); an
**observation** is a run at one logged step t with the signals of the update before t
(``sandbox.diagnostics.SIGNALS``). With c the run's collapse step (``sandbox.analysis.collapse``)
and N the horizon (declared in ``simulations.early_warning``):

* positive: c − N ≤ t < c; negative: t < c − N, or any t ≤ budget − N of a run that never
  collapsed; excluded: t ≥ c (it has happened) and the last N steps of a run that never collapsed
  (censored: it might collapse just after the budget).

Scores, each oriented by its declared direction (``+1``: high warns, ``−1``: low warns):

* **level**: the signal's value at t (what a fixed threshold sees);
* **rise**: its z-score against the run's own earlier values, (s_t − mean)/sd over the run's
  logged values before t (from ``MIN_HISTORY`` of them; a "spike");

A signal that is non-finite where the run diverged is the strongest warning (+∞); one a run does
not log is excluded. An alarm (verl's thresholds, ``sandbox.analysis.alarms``, or a rise of
``RISE_Z`` or more) is a binary score.

Statistics, with seeds (runs) as the unit:

* ROC AUC = P(score at a positive > score at a negative) + ½ P(tie), pooled over observations;
  its 95% interval is a percentile bootstrap over runs, stratified by whether the run collapsed
  (the runs are independent seeds), given only from ``MIN_RUNS`` collapsed and non-collapsed runs
  on (no bootstrap below about ten seeds): otherwise the AUC is shown without an interval;
* an alarm's detection rate (collapsed runs warned within N steps before the collapse; exact
  Clopper–Pearson interval), its median lead in steps (order-statistic interval, any n) and its
  false-alarm rate (per run, the share of its negative observations with the alarm on; mean over
  runs with a t-interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sandbox.analysis.alarms import warning_lead
from sandbox.analysis.collapse import collapse_event
from sandbox.analysis.stats import median_interval, t_interval

#: a rise is scored from this many earlier logged values of the run's signal on
MIN_HISTORY = 5
#: the rise alarm: the signal's z-score against its own history reaches this
RISE_Z = 3.0
#: no bootstrap interval with fewer collapsed (or non-collapsed) runs than this
MIN_RUNS = 10
RESAMPLES = 2000


@dataclass(frozen=True)
class Observations:
    """Every observation: its run (index into ``runs``), step, label (1 positive, 0 negative),
    whether its run had diverged there, the raw signals {column: array} and the oriented scores
    {"signal: level" | "signal: rise": array}; ``runs`` holds one row per run (``collapse_step``,
    ``budget``, ``diverged``)."""

    run: np.ndarray
    step: np.ndarray
    label: np.ndarray
    diverged: np.ndarray
    raw: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    runs: pd.DataFrame


def _rise(values: np.ndarray) -> np.ndarray:
    """z-score of each value against the finite values before it (NaN before ``MIN_HISTORY``)."""
    out = np.full(values.shape, np.nan)
    for t in range(len(values)):
        past = values[:t][np.isfinite(values[:t])]
        if past.size >= MIN_HISTORY and np.isfinite(values[t]):
            sd, gap = past.std(ddof=1), values[t] - past.mean()
            out[t] = gap / sd if sd > 0 else (0.0 if gap == 0 else math.copysign(math.inf, gap))
    return out


def observations(frame: pd.DataFrame, directions: dict[str, int], horizon: int, metric: str = "error") -> Observations:
    """The observations of every run in ``frame`` (one row per logged step and run; a run is a
    (job_id, member); rows repeated by the figure's tags are read once). ``directions``: the
    signals scored, +1 where a high value warns, −1 where a low one does."""
    frame = frame.drop_duplicates(["job_id", "member", "step"]).sort_values(["job_id", "member", "step"])
    runs, parts = [], []
    for i, ((job, member), run) in enumerate(frame.groupby(["job_id", "member"], sort=True)):
        steps = run["step"].to_numpy()
        budget = int(run["steps"].iloc[0]) if "steps" in run else int(steps.max())
        c = collapse_event(steps, run[metric].to_numpy(dtype=float), budget=budget).collapse_step
        diverged = run["diverged"].to_numpy(dtype=bool) if "diverged" in run else np.zeros(len(run), bool)
        diverged = diverged | ~np.isfinite(run[metric].to_numpy(dtype=float))
        keep = steps <= budget - horizon if c is None else steps < c
        label = np.zeros(len(steps), int) if c is None else ((steps >= c - horizon) & (steps < c)).astype(int)
        raw, scores = {}, {}
        for signal, sign in directions.items():
            x = run[signal].to_numpy(dtype=float) if signal in run else np.full(len(run), np.nan)
            broken = ~np.isfinite(x) & diverged
            raw[signal] = x[keep]
            scores[f"{signal}: level"] = np.where(broken, np.inf, sign * x)[keep]
            scores[f"{signal}: rise"] = np.where(broken, np.inf, sign * _rise(x))[keep]
        parts.append((np.full(int(keep.sum()), i), steps[keep], label[keep], diverged[keep], raw, scores))
        runs.append({"job_id": job, "member": int(member), "collapse_step": c, "budget": budget,
                     "diverged": bool(diverged.any())})
    if not parts:
        raise ValueError("frame holds no runs")

    def cat(k: int) -> np.ndarray:
        return np.concatenate([p[k] for p in parts])

    return Observations(cat(0), cat(1), cat(2), cat(3), {n: np.concatenate([p[4][n] for p in parts]) for n in directions},
                        {n: np.concatenate([p[5][n] for p in parts]) for n in parts[0][5]}, pd.DataFrame(runs))


def _concordance(obs: Observations, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """C[i, j] = Σ over positives p of run i and negatives q of run j of [p > q] + ½[p = q], with
    the positives per run P and negatives per run Q (observations whose score is NaN excluded)."""
    ok = ~np.isnan(score)
    n = len(obs.runs)
    pos, neg = ok & (obs.label == 1), ok & (obs.label == 0)
    P = np.bincount(obs.run[pos], minlength=n).astype(float)
    Q = np.bincount(obs.run[neg], minlength=n).astype(float)
    C = np.zeros((n, n))
    for j in np.flatnonzero(Q):
        q = np.sort(score[neg & (obs.run == j)])
        below = np.searchsorted(q, score[pos], side="left")
        ties = np.searchsorted(q, score[pos], side="right") - below
        C[:, j] = np.bincount(obs.run[pos], weights=below + 0.5 * ties, minlength=n)
    return C, P, Q


def auc(obs: Observations, name: str, seed: int = 0) -> dict:
    """The pooled ROC AUC of score ``name`` with its stratified run-bootstrap 95% interval (NaN
    below ``MIN_RUNS`` runs in a stratum), the per-run placements (each collapsed run's mean over
    its positives of the share of negatives it outranks) and the counts."""
    C, P, Q = _concordance(obs, obs.scores[name])
    total = P.sum() * Q.sum()
    est = float(C.sum() / total) if total else math.nan
    collapsed = np.flatnonzero(P > 0)
    calm = np.flatnonzero((P == 0) & (Q > 0))
    placements = C.sum(axis=1)[collapsed] / (P[collapsed] * Q.sum()) if Q.sum() else np.array([])
    low = high = math.nan
    if len(collapsed) >= MIN_RUNS and len(calm) >= MIN_RUNS:
        rng = np.random.default_rng(seed)
        n, draws = len(obs.runs), []
        for _ in range(RESAMPLES):
            w = np.zeros(n)
            np.add.at(w, rng.choice(collapsed, len(collapsed)), 1)
            np.add.at(w, rng.choice(calm, len(calm)), 1)
            denominator = (w @ P) * (w @ Q)
            draws.append(w @ C @ w / denominator)
        low, high = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    return {"auc": est, "low": low, "high": high, "placements": placements, "collapsed_runs": len(collapsed),
            "calm_runs": len(calm), "positives": int(P.sum()), "negatives": int(Q.sum())}


def roc_curve(obs: Observations, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(false-positive rate, true-positive rate) over every threshold of score ``name``."""
    s, y = obs.scores[name], obs.label
    ok = ~np.isnan(s)
    s, y = s[ok], y[ok]
    if not y.any() or y.all():
        return np.array([0.0, 1.0]), np.array([0.0, 1.0])
    order = np.argsort(-s, kind="stable")
    tps, fps = np.cumsum(y[order]), np.cumsum(1 - y[order])
    keep = np.r_[np.diff(s[order]) != 0, True]
    return np.r_[0.0, fps[keep] / fps[-1]], np.r_[0.0, tps[keep] / tps[-1]]


def alarm_metrics(obs: Observations, on: np.ndarray, horizon: int) -> dict:
    """Detection, median lead and false-alarm rate of the binary alarm ``on`` (one per observation)."""
    runs = obs.runs
    leads = []
    for i, c in enumerate(runs["collapse_step"]):
        if c is None or c != c:  # no collapse (None, or NaN once in a frame)
            continue
        mine = obs.run == i
        leads.append(warning_lead(obs.step[mine], on[mine], int(c), horizon))
    leads = np.asarray(leads, dtype=float)
    warned = leads[np.isfinite(leads)]
    detect = stats.binomtest(len(warned), len(leads)).proportion_ci(method="exact") if len(leads) else None
    per_run = [on[(obs.run == i) & (obs.label == 0)].mean() for i in range(len(runs))
               if ((obs.run == i) & (obs.label == 0)).any()]
    fa = t_interval(np.asarray(per_run)) if len(per_run) else None
    lead_iv = median_interval(warned) if len(warned) else None
    return {
        "collapses": len(leads), "warned": len(warned),
        "detection": (len(warned) / len(leads), detect.low, detect.high) if len(leads) else (math.nan,) * 3,
        "lead": (lead_iv.estimate, lead_iv.low, lead_iv.high) if lead_iv else (math.nan,) * 3,
        "false_alarm": (fa.estimate, fa.low, fa.high) if fa else (math.nan,) * 3,
        "false_alarm_runs": np.asarray(per_run),
    }


__all__ = ["MIN_HISTORY", "MIN_RUNS", "RESAMPLES", "RISE_Z", "Observations", "alarm_metrics", "auc", "observations",
           "roc_curve"]
