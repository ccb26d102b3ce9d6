"""Does a signal warn beyond what the configuration already says? (figure ``early-warning``, issue 43
part 4.) The first round's pooled AUCs rewarded knowing the configuration: the lag alone, known
before any run, scored 0.79. Here, on the same observations (``simulations.cases.warning``):

* a **configuration** is one job: one run config (lag, κ, estimator, …), its seeds as members;
* the **within-configuration AUC** compares each positive only with the calm (negative)
  observations of runs of its own configuration: Σ_c Σ_{p∈c, q∈c} ([s_p > s_q] + ½[s_p = s_q]) /
  Σ_c |pos_c|·|neg_c|. A score that knows only the configuration is constant there: 0.5;
* the **configuration baseline** knows only the configuration: each configuration's share of
  positive observations on these runs, a constant within it (so 0.5 within a configuration). Fitted
  in sample (once; the bootstrap resamples runs under that fixed score), it is the most any score
  that knows only the configuration can reach here: an upper bound, so beating it is conservative. (A leave-one-run-out
  share would not do: within a configuration it ranks a run higher the fewer collapses the *other*
  runs had, i.e. below chance, and a signal that knows only the configuration would beat it.) Its
  pooled AUC is computed from the configurations' counts: Σ_{c,c'} P_c·Q_c'·([r_c > r_c'] + ½[r_c = r_c'])
  / (ΣP·ΣQ), r_c = P_c / (P_c + Q_c);
* a signal **warns** only if its pooled AUC beats the baseline's: the paired difference with a
  95% percentile bootstrap over runs (one fixed generator, the same draws for every score,
  stratified by whether a run collapsed) lies above 0;
* an alarm's **lead**, uncapped: from its first firing at any logged step before the collapse to
  the collapse (median, order-statistic interval); its **false-alarm rate per calm step**: the
  share of all calm observations on which it is on, with the same run bootstrap.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox.analysis.alarms import warning_lead
from sandbox.analysis.stats import median_interval
from simulations.cases.warning import RESAMPLES, Observations, _concordance

__all__ = ["BASELINE", "baseline_score", "compare", "run_weights", "uncapped"]

#: the score name of the configuration baseline in ``Observations.scores``
BASELINE = "configuration"


def baseline_score(obs: Observations) -> np.ndarray:
    """Per observation: the share of positives among the observations of its run's configuration
    (in sample; the score the baseline's AUC ranks by)."""
    config, per = obs.runs["job_id"].to_numpy()[obs.run], {}
    for c in np.unique(config):
        mine = config == c
        per[c] = float(obs.label[mine].mean())
    return np.array([per[c] for c in config])


def _baseline_draws(obs: Observations, W: np.ndarray) -> tuple[float, np.ndarray]:
    """The configuration baseline's pooled AUC on the data and on each bootstrap draw (refitted)."""
    n = len(obs.runs)
    P = np.bincount(obs.run[obs.label == 1], minlength=n).astype(float)
    Q = np.bincount(obs.run[obs.label == 0], minlength=n).astype(float)
    _, config = np.unique(obs.runs["job_id"].to_numpy(), return_inverse=True)
    G = np.zeros((n, config.max() + 1))
    G[np.arange(n), config] = 1.0

    rate = _ratio(P @ G, (P + Q) @ G)  # fitted once, on every run: the score is fixed, the runs resampled
    order = np.sign(rate[:, None] - rate[None, :])  # [c, c']: +1 where r_c > r_c'
    score = np.where(np.isnan(order), 0.0, (order + 1) / 2)

    def aucs(weights: np.ndarray) -> np.ndarray:
        Pc, Qc = (weights * P) @ G, (weights * Q) @ G  # draws × configurations
        return _ratio(((Pc @ score) * Qc).sum(1), Pc.sum(1) * Qc.sum(1))

    return float(aucs(np.ones((1, n)))[0]), aucs(W)


def run_weights(obs: Observations, seed: int = 0, resamples: int = RESAMPLES) -> np.ndarray:
    """``resamples`` × runs bootstrap weights: collapsed runs (any positive) and calm runs each
    resampled with replacement within their stratum, from one fixed generator."""
    n = len(obs.runs)
    P = np.bincount(obs.run[obs.label == 1], minlength=n)
    Q = np.bincount(obs.run[obs.label == 0], minlength=n)
    collapsed, calm = np.flatnonzero(P > 0), np.flatnonzero((P == 0) & (Q > 0))
    rng = np.random.default_rng(seed)
    W = np.zeros((resamples, n))
    for b in range(resamples):
        np.add.at(W[b], rng.choice(collapsed, len(collapsed)), 1)
        np.add.at(W[b], rng.choice(calm, len(calm)), 1)
    return W


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _pooled_and_within(obs: Observations, name: str, W: np.ndarray) -> dict:
    """Pooled and within-configuration AUC of score ``name``, with their bootstrap draws."""
    C, P, Q = _concordance(obs, obs.scores[name])
    config = obs.runs["job_id"].to_numpy()
    same = config[:, None] == config[None, :]
    Cw = C * same
    pooled = _ratio(np.array(C.sum()), np.array(P.sum() * Q.sum()))
    within = _ratio(np.array(Cw.sum()), np.array(P @ same @ Q))
    draws_pooled = _ratio(((W @ C) * W).sum(1), (W @ P) * (W @ Q))
    draws_within = _ratio(((W @ Cw) * W).sum(1), (((W * P) @ same.astype(float)) * (W * Q)).sum(1))
    collapsed = np.flatnonzero(P > 0)
    placements = C.sum(axis=1)[collapsed] / (P[collapsed] * Q.sum()) if Q.sum() else np.array([])
    return {"pooled": float(pooled), "within": float(within), "draws_pooled": draws_pooled,
            "draws_within": draws_within, "placements": placements, "collapsed": collapsed}


def _interval(draws: np.ndarray) -> tuple[float, float]:
    ok = draws[np.isfinite(draws)]
    return (math.nan, math.nan) if ok.size < 0.9 * draws.size else tuple(float(x) for x in np.percentile(ok, [2.5, 97.5]))


def compare(obs: Observations, name: str, W: np.ndarray) -> dict:
    """Score ``name`` against the configuration baseline (its score is left in
    ``obs.scores[BASELINE]``) on the bootstrap weights ``W``: pooled AUC, within-configuration
    AUC, the baseline's pooled AUC and the paired difference, each (estimate, low, high); ``warns``
    when the difference's interval lies above 0; ``values``: per collapsed run, the signal's
    placement minus the baseline's."""
    s = _pooled_and_within(obs, name, W)
    base, base_draws = _baseline_draws(obs, W)
    diff = s["draws_pooled"] - base_draws
    out = {"pooled": (s["pooled"], *_interval(s["draws_pooled"])),
           "within": (s["within"], *_interval(s["draws_within"])),
           "baseline": (base, *_interval(base_draws)),
           "difference": (s["pooled"] - base, *_interval(diff))}
    out["warns"] = bool(out["difference"][1] > 0)
    obs.scores[BASELINE] = baseline_score(obs)
    b = _pooled_and_within(obs, BASELINE, W[:1])
    both = np.intersect1d(s["collapsed"], b["collapsed"])
    sp, bp = dict(zip(s["collapsed"], s["placements"])), dict(zip(b["collapsed"], b["placements"]))
    out["values"] = np.array([sp[i] - bp[i] for i in both])
    return out


def uncapped(obs: Observations, on: np.ndarray, W: np.ndarray) -> dict:
    """Lead of the binary alarm ``on`` from its first firing before each collapse (no horizon),
    with how many collapses it fired before; its false-alarm rate per calm step, pooled, with the
    run bootstrap ``W``."""
    runs, leads = obs.runs, []
    for i, c in enumerate(runs["collapse_step"]):
        if c is None or c != c:
            continue
        mine = obs.run == i
        leads.append(warning_lead(obs.step[mine], on[mine], int(c), int(c) + 1))
    leads = np.asarray(leads, dtype=float)
    warned = leads[np.isfinite(leads)]
    lead = median_interval(warned) if warned.size else None
    calm = obs.label == 0
    n = len(runs)
    fired = np.bincount(obs.run[calm & on], minlength=n).astype(float)
    steps = np.bincount(obs.run[calm], minlength=n).astype(float)
    rate = float(fired.sum() / steps.sum()) if steps.sum() else math.nan
    return {"collapses": int(leads.size), "fired_before": int(warned.size),
            "lead": (lead.estimate, lead.low, lead.high) if lead else (math.nan,) * 3,
            "leads": warned, "false_alarm": (rate, *_interval(_ratio(W @ fired, W @ steps)))}
