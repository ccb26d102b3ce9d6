"""Each case's runs → its verdict at each scale, the sandbox's measurement with its interval, and the
cause of a disagreement (figure ``published-outcomes``; docs/predictions.md, "Results").

The verdict is ``simulations.cases.verdicts.judge`` — the file's declared rule, executed once; this
module adds what the figure and its claim rows show beside it:

* the **measurement** the rule's test read, with the interval that matches the test: a one-sided
  test at α is decided by the two-sided (1 − 2α) interval (its bound on the tested side), so the
  interval lies beyond the threshold exactly when the test agrees. Fisher's exact test is shown as
  the conditional odds ratio of collapsing (worse against better) with its exact interval (the
  inversion of the same test); the t-tests as their mean and t-interval; ``noninferior`` as the
  difference against its margin δ;
* at a **control-only scale** (the amended paper tier's 256-token scales) the control's learning:
  a control that does not learn makes the case inconclusive there ("does not appear at any size we
  can run"); one that learns leaves the case "not run" there (its arms were not run);
* the **cause** of each disagreement, read off the measurement (which arm did what), and the rule's
  known weak point for the mechanism (docs/predictions.md, "The mapping rule", point 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from scipy.stats.contingency import odds_ratio

from sandbox.analysis.collapse import collapse_event, prosperity_before_collapse
from simulations.cases import Case, CaseFile, scale_runs, steps_of
from simulations.cases.verdicts import Verdict, event_of, judge

#: the case file's fidelity behind each figure fidelity ('full' has no case-file tier of its own)
CASE_FIDELITY = {"quick": "quick", "paper": "paper", "full": "full"}
#: how the figure shows a verdict: the rule's 'opposite' and 'not-reproduced' are both disagreements
SHOWN = {"agree": "agree", "opposite": "disagree", "not-reproduced": "disagree", "inconclusive": "inconclusive",
         "not run": "not run", "does-not-discriminate": "does not discriminate"}
#: the rule's weak point per mechanism, named beside every disagreement (docs/predictions.md)
SUSPECTS = {
    "staleness": "the mapping rule does not match the per-update policy change (a lag of k updates of Adam "
                 "3e-4 on a 0.1 M-parameter toy is not k updates of 1e-6 on billions: rule point 4)",
    "mismatch": "the reference scale answers 4 tokens, so a per-token mismatch cannot add up over an answer "
                "(the 256-token scales carry length, but their controls were not shown to learn)",
}


@dataclass(frozen=True)
class CaseResult:
    """One case at one scale: the verdict (``SHOWN``'s words; ``rule`` the file's own), the
    measurement with its interval (``side``/``against``: where the interval must lie to agree),
    the per-seed vector the test read, the seeds per arm and how many of the case's seeds diverged,
    the measurement in words and, unless it agrees, why."""

    case: Case
    scale: str
    verdict: str
    rule: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    side: str = ""
    against: float = 0.0
    values: tuple = ()
    n: int = 0
    diverged: int = 0
    measured: str = ""
    cause: str = ""
    p_forward: float = math.nan
    label: str = ""  # what the estimate is where a bare number would mislead ('Fisher p': a contrast's p-value)

    @property
    def conclusive(self) -> bool:
        return self.verdict in ("agree", "disagree")


def arm_frames(frame: pd.DataFrame, case_id: str, scale: str) -> dict[str, pd.DataFrame]:
    """{arm: the rows of its runs} of one case at one scale, ``seed`` set to the seed each row is
    (member m of a batched run is seed seeds[0] + m)."""
    rows = frame[(frame["case"] == case_id) & (frame["scale"] == scale)]
    return {arm: g.assign(seed=g["seed"] + g["member"]) for arm, g in rows.groupby("arm", sort=False)}


def _diverged(frames: dict[str, pd.DataFrame]) -> int:
    return sum(int(g.groupby("seed")["error"].apply(lambda v: v.isna().any()).sum()) for g in frames.values())


def _curves(frame: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {int(k): (g["step"].to_numpy(), g["error"].to_numpy(dtype=float))
            for k, g in frame.sort_values("step").groupby("seed", sort=True)}


def _t(x, alpha: float) -> tuple[float, float, float]:
    """Mean and the two-sided (1 − 2α) t-interval (each bound a one-sided 1 − α bound); a
    constant vector is its own point, no interval."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    if x.size < 2 or np.ptp(x) == 0:
        return float(x.mean()), float(x.mean()), float(x.mean())
    half = stats.t.ppf(1 - alpha, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)


def _table(worse: list[bool], better: list[bool]) -> list[list[int]]:
    """The 2×2 table of counts: rows worse, better; columns collapsed, not."""
    return [[sum(worse), len(worse) - sum(worse)], [sum(better), len(better) - sum(better)]]


def fisher_p(worse: list[bool], better: list[bool]) -> tuple[float, float]:
    """Fisher's exact one-sided p-values of the 2×2 table (the case rule's test,
    ``simulations.cases.verdicts``): worse collapses more often, and the other way."""
    table = _table(worse, better)
    return (float(stats.fisher_exact(table, alternative="greater").pvalue),
            float(stats.fisher_exact(table, alternative="less").pvalue))


def odds_text(worse: list[bool], better: list[bool], alpha: float) -> str:
    """The conditional odds ratio of collapsing, worse against better, with its exact two-sided
    (1 − 2α) interval (the inversion of Fisher's test) — only where it is defined: a table whose
    arms all collapsed, or none did, has no odds ratio (the conditional MLE is 0/0), and says so."""
    table = _table(worse, better)
    if table[0][0] + table[1][0] in (0, len(worse) + len(better)):
        return "odds ratio undefined (" + ("no seed of either arm collapsed" if table[0][0] + table[1][0] == 0
                                           else "every seed of both arms collapsed") + ")"
    res = odds_ratio(table, kind="conditional")
    ci = res.confidence_interval(confidence_level=1 - 2 * alpha)
    return f"conditional odds ratio {res.statistic:.3g} [{ci.low:.3g}, {ci.high:.3g}] ({1 - 2 * alpha:.0%}, exact)"


def _arm_words(case: Case, arm: str) -> str:
    from simulations.cases import load_cases
    from simulations.cases.report import _arm

    return f"{arm} ({_arm(case.arms[arm], load_cases().mapping)})"


def measure(case: Case, frames: dict[str, pd.DataFrame], verdict: Verdict, budget: int,
            alpha: float) -> dict:
    """The measurement behind ``verdict``: estimate, interval, side, threshold, per-seed vector,
    and the sentence that states it."""
    d, stat = case.decision, case.decision["statistic"]
    if stat in ("collapse_contrast", "prosperity_contrast"):
        control = _curves(frames["control"])
        steps = {}
        for arm in (d["worse"], d["better"]):
            steps[arm] = []
            for seed, (s, v) in _curves(frames[arm]).items():
                event = event_of(s, v, budget, d.get("event", "collapse"))
                shape = event.collapsed and (stat == "collapse_contrast" or
                                             prosperity_before_collapse(s, v, *control[seed], budget=budget))
                steps[arm].append(event.collapse_step if shape else budget)
        flags = {arm: [x < budget for x in xs] for arm, xs in steps.items()}
        worse, better = flags[d["worse"]], flags[d["better"]]
        p_forward, p_reverse = fisher_p(worse, better)
        what = "collapsed" if stat == "collapse_contrast" else "collapsed after tracking the control"
        text = (f"{what}: {_arm_words(case, d['worse'])} {sum(worse)}/{len(worse)}, "
                f"{_arm_words(case, d['better'])} {sum(better)}/{len(better)}; Fisher's exact one-sided p = "
                f"{p_forward:.3g} ({d['worse']} collapses more; the other way {p_reverse:.3g}); "
                + odds_text(worse, better, alpha))
        # no event in either arm: every seed is censored at the budget, a constant that measured no
        # collapse step — no per-seed vector, so the claim audit cannot take two such contrasts of
        # different configurations for one measurement (claim_identity: a vector with a NaN is not compared)
        values = steps[d["worse"]] + steps[d["better"]]
        values = values if any(worse) or any(better) else [math.nan] * len(values)
        # nor an estimate: Fisher's p of a table with no event is 1 by construction, whatever the case
        # (six cases read the same "1"); the row says "no estimate" and its counts say why
        p_shown = p_forward if any(worse) or any(better) else math.nan
        return dict(estimate=p_shown, low=p_shown, high=p_shown, side="below", against=alpha,
                    values=tuple(values), text=text, flags=flags, label="Fisher p")
    if stat in ("final_contrast", "noninferior", "signal_level"):
        diff = np.asarray(verdict.detail["difference"], dtype=float)
        diff = diff[np.isfinite(diff)]
        est, low, high = _t(diff, alpha)
        if stat == "noninferior":
            delta = verdict.detail["delta"]
            text = (f"final error of {_arm_words(case, d['arm'])} − control: {est:+.3f} [{low:+.3f}, {high:+.3f}] "
                    f"(paired t, {1 - 2 * alpha:.0%}) against the margin δ = {delta:.3f}")
            return dict(estimate=est, low=low, high=high, side="below", against=float(delta), values=tuple(diff), text=text)
        what = "final error" if stat == "final_contrast" else f"mean {d['signal']} over the second half"
        other = d.get("better", d.get("against", "control"))
        text = (f"{what}, {_arm_words(case, d['worse'])} − {other}: {est:+.3g} [{low:+.3g}, {high:+.3g}] "
                f"(paired t, {1 - 2 * alpha:.0%})")
        side = "below" if d.get("direction") == "down" and stat == "signal_level" else "above"
        return dict(estimate=est, low=low, high=high, side=side, against=0.0, values=tuple(diff), text=text)
    if stat == "signal_lead":
        x = np.asarray(verdict.detail.get("lead", []), dtype=float)
        est, low, high = _t(x, alpha) if x.size >= 3 else (float(x.mean()) if x.size else math.nan, math.nan, math.nan)
        text = (f"steps by which {d['signal']} reached {d['factor']:g}× its learned-step value before {d['lagging']} did, "
                f"over the {x.size} events of {_arm_words(case, d['worse'])}: {est:.3g} [{low:.3g}, {high:.3g}]")
        return dict(estimate=est, low=low, high=high, side="above", against=0.0, values=tuple(x), text=text)
    # signal_rise, signal_trend
    x = np.asarray(verdict.detail.get("log10_rise", []), dtype=float)
    threshold = math.log10(d["factor"])
    direction = "rise" if d.get("direction", "up") == "up" else "fall"
    if x.size < 3:
        est = float(x.mean()) if x.size else math.nan
        text = (f"{x.size} collapsed seed(s) of {_arm_words(case, d['worse'])}: fewer than 3, the collapse the "
                f"{d['signal']} {direction} should precede did not appear")
        return dict(estimate=est, low=math.nan, high=math.nan, side="above", against=threshold, values=tuple(x), text=text)
    est, low, high = _t(x, alpha)
    if stat == "signal_trend":
        text = (f"log10 of {d['signal']} over the last quarter against its low before, over {x.size} seeds of "
                f"{_arm_words(case, d['worse'])}: {est:.3g} [{low:.3g}, {high:.3g}] against log10({d['factor']:g})")
        return dict(estimate=est, low=low, high=high, side="above", against=threshold, values=tuple(x), text=text)
    text = (f"log10 {direction} of {d['signal']} from the learned step to just before the collapse, over the "
            f"{x.size} collapsed seeds of {_arm_words(case, d['worse'])}: {est:.3g} [{low:.3g}, {high:.3g}] "
            f"(t, {1 - 2 * alpha:.0%}) against log10({d['factor']:g}) = {threshold:.3g}")
    return dict(estimate=est, low=low, high=high, side="above", against=threshold, values=tuple(x), text=text)


def _cause(case: Case, verdict: Verdict, m: dict) -> str:
    """Why a conclusive case disagrees: what the measurement shows, and the rule's weak point."""
    if verdict.verdict == "does-not-discriminate":
        plain = verdict.detail["plain"]["bounds"]
        return (f"does not discriminate: the plain arm passes the same test (its final error − control "
                f"{plain[0]:+.3f} … {plain[1]:+.3f} against δ = {verdict.detail['delta']:.3f})")
    seen = {"opposite": "the sandbox shows the opposite: ", "not-reproduced": "not reproduced: "}[verdict.verdict]
    d, stat = case.decision, case.decision["statistic"]
    if stat in ("collapse_contrast", "prosperity_contrast"):
        worse, better = m["flags"][d["worse"]], m["flags"][d["better"]]
        if not any(worse) and not any(better):
            what = "no seed of either arm collapsed at this scale: the published collapse did not appear"
        elif verdict.verdict == "opposite":
            what = f"{d['better']} collapsed in more seeds ({sum(better)}) than {d['worse']} ({sum(worse)})"
        else:
            what = (f"{d['worse']} collapsed in {sum(worse)} of {len(worse)} seeds, {d['better']} in {sum(better)}: "
                    "too few, or too alike, to tell apart at this seed count")
    elif stat == "signal_rise" and len(verdict.detail.get("log10_rise", [])) < 3:
        what = "fewer than 3 seeds of the worse arm collapsed, so there was no collapse to precede"
    else:
        what = m["text"]
    return f"{seen}{what}; first suspect: {SUSPECTS[case.mechanism]}"


def control_only(case: Case, frames: dict[str, pd.DataFrame], budget: int, scale: str, fidelity: str) -> CaseResult:
    """The case at a scale where only its control ran: inconclusive unless the control learned
    (≥ 75% of its seeds, none collapsed), in which case its arms were simply not run."""
    events = [collapse_event(s, v, budget=budget) for s, v in _curves(frames["control"]).values()]
    learned, collapsed = sum(e.learned for e in events), sum(e.collapsed for e in events)
    gains = [float(v[0] - np.nanmin(np.where(np.isnan(v), np.inf, v))) / max(v[0], 1e-12)
             for s, v in _curves(frames["control"]).values()]
    text = (f"the control learned in {learned} of {len(events)} seeds within {budget} steps "
            f"(best gain {', '.join(f'{g:.0%}' for g in gains)} of the way to perfect; learning needs 20%)")
    common = dict(values=tuple(gains), n=len(events), diverged=_diverged(frames), measured=text,
                  estimate=float(np.mean(gains)), low=float(np.min(gains)), high=float(np.max(gains)))
    if learned < 0.75 * len(events) or collapsed:
        tokens = case_tokens(scale)
        return CaseResult(case, scale, "inconclusive", "inconclusive", cause=(
            f"does not appear at any size we can run: the control does not learn at {tokens} tokens in {budget} steps "
            f"({learned} of {len(events)} seeds learned)"), **common)
    return CaseResult(case, scale, "not run", "not run", cause=(
        f"not run at this scale: the control learns here, but the case's other arms were not run at {fidelity} fidelity"),
        **common)


def case_tokens(scale: str) -> int:
    """Answer tokens of a case scale (thinking tokens included)."""
    from simulations.cases import load_cases

    kw = load_cases().mapping["scales"][scale]["task_kwargs"]
    return int(kw.get("think", 0)) + int(kw["H"])


def judge_case(cf: CaseFile, case: Case, frame: pd.DataFrame, fidelity: str) -> list[CaseResult]:
    """``case`` at every scale of the figure's ``fidelity`` ('quick', 'paper' or 'full')."""
    fid = CASE_FIDELITY[fidelity]
    alpha = float(cf.mapping["alpha"])
    out = []
    for scale, runs in scale_runs(case, cf.mapping, fid).items():
        if runs.skipped:
            out.append(CaseResult(case, scale, "not run", "not run", cause=runs.skipped, n=len(runs.seeds)))
            continue
        budget = steps_of(case, cf.mapping, fid, scale)
        frames = arm_frames(frame, case.id, scale)
        if set(runs.arms) != set(case.arms):
            out.append(control_only(case, frames, budget, scale, fid))
            continue
        verdict = judge(case, frames, budget, cf.mapping["metric"], alpha)
        common = dict(n=len(runs.seeds), diverged=_diverged(frames), p_forward=verdict.p_forward)
        if verdict.verdict == "inconclusive" and verdict.detail.get("frozen"):
            out.append(CaseResult(case, scale, "inconclusive", "inconclusive", cause=(
                f"the control froze: fewer than 3 seed pairs kept a non-zero gradient in "
                f"{case.decision['min_live']:.0%} of their second-half steps"), **common))
            continue
        if verdict.verdict == "inconclusive":
            learned = verdict.detail["control_learned"]
            out.append(CaseResult(case, scale, "inconclusive", "inconclusive", cause=(
                f"the on-policy control did not provide a stable reference: {learned:.0%} of its seeds learned, "
                f"{verdict.detail['control_collapsed']} collapsed (the rule needs ≥ 75% and none)"), **common))
            continue
        m = measure(case, frames, verdict, budget, alpha)
        cause = "" if verdict.verdict == "agree" else _cause(case, verdict, m)
        out.append(CaseResult(case, scale, SHOWN[verdict.verdict], verdict.verdict, m["estimate"], m["low"], m["high"],
                              m["side"], m["against"], m["values"], measured=m["text"], cause=cause,
                              label=m.get("label", ""), **common))
    return out


def agreement(results: list[CaseResult], confidence: float = 0.95) -> tuple[int, int, float, float, float]:
    """(agree, conclusive, rate, low, high): the agreement rate over conclusive results with its
    exact Clopper–Pearson interval."""
    conclusive = [r for r in results if r.conclusive]
    k, n = sum(r.verdict == "agree" for r in conclusive), len(conclusive)
    if n == 0:
        return 0, 0, math.nan, math.nan, math.nan
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return k, n, k / n, float(ci.low), float(ci.high)


__all__ = ["CASE_FIDELITY", "SHOWN", "SUSPECTS", "CaseResult", "agreement", "arm_frames", "case_tokens",
           "control_only", "judge_case", "measure"]
