"""early-warning: which logged signal, and which of verl's documented alarms, warns of a collapse
within the next N steps? (issue 32)

Runs: every case run of ``published-outcomes`` at the reference scale (the same jobs) and a grid
at that scale, staleness × mismatch × estimator, declared here before any of its runs (``GRID``):
estimators that collapse under staleness in the sandbox's other figures (the reference code's PG,
i.e. GRPO without its trust region, and PMPO: ``frictions`` at H = 10) beside two that hold
(GRPO, VCPO's sequence TIS), lags U{0..D} and the measured mismatch up to 100× the calibrated bf16
level, with enough seeds per cell (16 at paper) that some runs collapse and most do not.

Declared before the data (this module): the horizon N (``HORIZON``), the direction in which each
signal warns (``DIRECTIONS``; +1 high, −1 low) and the score form each is judged by
(``FORM``: its level, or its rise against its own history — VCPO's "spikes"), verl's thresholds
(``sandbox.analysis.alarms.ALARMS``) and the rise alarm (z ≥ ``RISE_Z``). Statistics:
``simulations.cases.warning``. Claims: one ROC AUC row per signal in its declared form and per
verl alarm; at paper fidelity the rows that test a published statement are asserted (AUC above
0.5 with its 95% run-bootstrap interval: ``ASSERTED``), the others reported; verl's alarms' lead
times and false-alarm rates are reported. A signal whose interval reaches 0.5 does not warn
here, and the table says so. Quick fidelity is a smoke test: every row reported.

Second round (issue 43, part 4; the rule set after the first round's data): a pooled AUC rewards
knowing the configuration, so each score also has a ``warns-*`` row — its pooled AUC against a score
that knows only the configuration, with its AUC within a configuration beside it
(``simulations.cases.warning_config``); a signal counts as a warning only if it beats that score
(asserted for the published statements at paper fidelity). verl's alarms' lead is uncapped (from
the first firing before the collapse) and their false alarms are per calm step.
"""

from __future__ import annotations

import math

import pandas as pd

from sandbox.analysis.alarms import ALARMS
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.stats import Interval
from sandbox.core.validation import check_choice
from sandbox.jobs.sweep import unique_jobs
from sandbox.methods import method
from sandbox.runtime.config import RunConfig
from simulations import FIDELITIES, Figure, Plan, register_figure
from simulations.cases import load_cases, loss_fields
from simulations.cases.warning import RISE_Z, alarm_metrics, auc, observations
from simulations.cases.warning_config import compare, run_weights, uncapped
from simulations.published_outcomes import CASE_DATA
from simulations.published_outcomes import plan as case_plan
from simulations.sequences import _job

FIGURE = "early-warning"
#: collapse within the next N learner steps (quick runs are 80 steps long)
HORIZON = {"quick": 20, "paper": 50, "full": 50}
#: the direction in which each signal is expected to warn: +1 a high value, −1 a low one
DIRECTIONS = {"ess_frac": -1, "kl_k1": 1, "kl_k3": 1, "log_ratio_abs_mean": 1, "log_ratio_abs_max": 1,
              "grad_norm": 1, "cos_consecutive": 1, "entropy": 1, "clip_frac": 1, "mask_frac": 1,
              "rollout_is_clip_frac": 1, "rollout_is_mask_frac": 1, "ratio_mean": 1}
#: the score each signal's claim row reads: its level, or its rise against its own history
FORM = {signal: "level" for signal in DIRECTIONS} | {"grad_norm": "rise"}
#: rows asserted at paper fidelity, each testing a published statement (AUC above 0.5)
ASSERTED = {
    "ess_frac": "VCPO: collapse is reliably predicted by effective sample size (ESS)",
    "grad_norm": "VCPO: ... and unstable gradient norms; Liu, Li et al.: gradient norms suddenly explode",
    "cos_consecutive": "GAC: stale-aligned (high-cosine) consecutive gradients increase the risk of divergence",
    "kl_k3": "Precision-RL: the sampler-trainer KL rises by orders of magnitude before BF16 GRPO collapses",
} | {alarm.name: f"verl's rollout-correction guide warns at {alarm.name} ({alarm.verl})" for alarm in ALARMS}
#: the grid: estimators (the case file's losses, PMPO the registry's) × lag D (U{0..D}) × token KL κ
GRID = {
    "quick": {"estimators": ("GRPO_no_TR", "GRPO"), "D": (0, 16), "kappa": (0.0, 0.1), "seeds": 2, "steps": 80,
              "log_points": 40},
    "paper": {"estimators": ("GRPO_no_TR", "PMPO", "GRPO", "TIS_seq8"), "D": (0, 16, 64), "kappa": (0.0, 0.01, 0.1),
              "seeds": 16, "steps": 400, "log_points": 150},
}
GRID["full"] = GRID["paper"]


def grid_config(estimator: str, D: int, kappa: float, fidelity: str) -> RunConfig:
    """One grid cell at the reference scale: its seeds as one batched population."""
    g, cf = GRID[fidelity], load_cases()
    fields = {**method("PMPO"), "advantage": "grpo"} if estimator == "PMPO" else loss_fields(estimator, cf.mapping)
    task = {**cf.mapping["scales"]["reference"]["task_kwargs"], "eval_mode": "exact", "samples_per_prompt": 8,
            "prompts_per_step": 10, "population": g["seeds"]}
    return RunConfig(task=cf.mapping["scales"]["reference"]["task"], task_kwargs=task, **fields,
                     staleness={"kind": "uniform", "D": D} if D else {},
                     frictions=(("measured_mismatch", {"token_kl": kappa}),) if kappa else (), seed=0,
                     steps=g["steps"], log_points=g["log_points"], label=f"grid/{estimator}/D={D}/kl={kappa:g}")


def plan(fidelity: str) -> Plan:
    """The case runs at the reference scale (one entry per job), then the grid."""
    check_choice("fidelity", fidelity, FIDELITIES)
    cases = unique_jobs([j for tags, jobs in case_plan(fidelity) if tags["scale"] == "reference" for j in jobs])
    out = [({"source": "case", "run": j.label}, [j]) for j in cases]
    g = GRID[fidelity]
    for estimator in g["estimators"]:
        for D in g["D"]:
            for kappa in g["kappa"]:
                config = grid_config(estimator, D, kappa, fidelity)
                out.append(({"source": "grid", "run": config.label}, [_job(config, {})]))
    return out


def measure(frame: pd.DataFrame, fidelity: str) -> dict:
    """Every score's AUC, every alarm's detection, lead and false alarms, and the observations;
    per claimed score its comparison with the configuration baseline (``compare``) and per verl
    alarm its uncapped lead and false alarms per calm step (``uncapped``)."""
    obs = observations(frame, DIRECTIONS, HORIZON[fidelity])
    aucs = {name: auc(obs, name) for name in obs.scores}
    alarms, loose = {}, {}
    weights = run_weights(obs)
    for alarm in ALARMS:
        on = alarm.on(obs.raw[alarm.column], obs.diverged)
        obs.scores[alarm.name] = on.astype(float)
        aucs[alarm.name] = auc(obs, alarm.name)
        alarms[alarm.name] = alarm_metrics(obs, on, HORIZON[fidelity])
        loose[alarm.name] = uncapped(obs, on, weights)
    for signal in DIRECTIONS:
        alarms[f"{signal} rise ≥ {RISE_Z:g}σ"] = alarm_metrics(obs, obs.scores[f"{signal}: rise"] >= RISE_Z,
                                                               HORIZON[fidelity])
    versus = {name: compare(obs, name, weights) for name in [f"{s}: {FORM[s]}" for s in DIRECTIONS]
              + [a.name for a in ALARMS]}
    return {"obs": obs, "auc": aucs, "alarms": alarms, "versus": versus, "uncapped": loose}


def _why_not(a: dict) -> str:
    if a["collapsed_runs"] == 0:
        return "no run collapsed where this score is logged: nothing to warn of"
    if a["negatives"] == 0:
        return "no observation without a collapse ahead"
    if math.isnan(a["low"]):
        return (f"{a['collapsed_runs']} collapsed and {a['calm_runs']} calm runs: fewer than 10 in a stratum, "
                "so no bootstrap interval")
    if a["low"] > 0.5:
        return ""
    return "does not warn here: its interval reaches 0.5" if a["high"] > 0.5 else "warns the other way: its interval lies below 0.5"


def claims(book: ClaimBook, frame: pd.DataFrame, fidelity: str) -> dict:
    """One AUC row per signal (its declared form) and per verl alarm; lead and false-alarm rows
    for verl's alarms. Returns ``measure``'s numbers."""
    m = measure(frame, fidelity)
    obs, smoke = m["obs"], fidelity == "quick"
    n, diverged = len(obs.runs), int(obs.runs["diverged"].sum())
    N = HORIZON[fidelity]
    rows = [(f"{s}: {FORM[s]}", s, f"{s} ({FORM[s]}, {'high' if DIRECTIONS[s] > 0 else 'low'} warns)") for s in DIRECTIONS]
    rows += [(a.name, a.name, f"verl's alarm {a.name} ({a.verl})") for a in ALARMS]
    for score, key, what in rows:
        a = m["auc"][score]
        why = _why_not(a)
        passed = None if smoke or key not in ASSERTED or "bootstrap" in why or a["collapsed_runs"] == 0 \
            else bool(a["low"] > 0.5)
        detail = (f"pooled ROC AUC over {a['positives']} observations with a collapse within {N} steps and "
                  f"{a['negatives']} without, from {a['collapsed_runs']} collapsed and {a['calm_runs']} calm runs; "
                  f"95% bootstrap over runs, stratified" + (f"; {why}" if why else ""))
        if key in ASSERTED:
            detail += f"; tests: {ASSERTED[key]}"
        if smoke:
            detail = f"quick fidelity is a smoke test: reported; {detail}"
        name = f"auc-{key.replace(' ', '')}"
        book.holds(name, f"{what} warns of a collapse within {N} steps (ROC AUC above 0.5)",
                   Interval(a["auc"], a["low"], a["high"], n=n), passed, detail, "evidence", n, diverged, "above", 0.5,
                   "auc", a["placements"])
    for score, key, what in rows:
        _versus(book, m["versus"][score], key, what, smoke, n, diverged)
    for alarm in ALARMS:
        al, un = m["alarms"][alarm.name], m["uncapped"][alarm.name]
        lead, fa, det = un["lead"], un["false_alarm"], al["detection"]
        book.holds(f"lead-{alarm.name.replace(' ', '')}", f"verl's alarm {alarm.name}: median steps from its first "
                   "firing before a collapse to the collapse (uncapped: any logged step before it)",
                   Interval(lead[0], lead[1], lead[2], n=n), None,
                   f"fired before {un['fired_before']} of {un['collapses']} collapses; within {N} steps before "
                   f"{al['warned']} (detection {det[0]:.2f} [{det[1]:.2f}, {det[2]:.2f}], exact); order-statistic 95% "
                   "interval of the median; reported", "evidence", n, diverged, test="lead", values=un["leads"])
        book.holds(f"false-alarm-{alarm.name.replace(' ', '')}", f"verl's alarm {alarm.name}: share of the calm steps "
                   f"(no collapse within {N} steps) on which it is on, pooled over every run",
                   Interval(fa[0], fa[1], fa[2], n=n), None, "95% percentile bootstrap over runs, stratified by "
                   "collapse; reported", "evidence", n, diverged, test="false-alarm", values=al["false_alarm_runs"])
    return m


def _versus(book: ClaimBook, v: dict, key: str, what: str, smoke: bool, n: int, diverged: int) -> None:
    """The row that decides whether ``key`` warns: its pooled AUC against the configuration
    baseline's (asserted, for a published statement at paper fidelity), with its AUC within a
    configuration beside the baseline's 0.5 there (``simulations.cases.warning_config``)."""
    d, w, b, p = v["difference"], v["within"], v["baseline"], v["pooled"]
    undecided = any(math.isnan(x) for x in d)
    passed = None if smoke or key not in ASSERTED or undecided else v["warns"]
    detail = (f"pooled AUC {p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}] against {b[0]:.3f} [{b[1]:.3f}, {b[2]:.3f}] for a score "
              f"that knows only the configuration (its other runs' share of steps before a collapse); within a "
              f"configuration AUC {w[0]:.3f} [{w[1]:.3f}, {w[2]:.3f}] where that score has 0.5; difference: 95% "
              "bootstrap over runs, stratified, the same draws for both (rule of issue 43, set after the first "
              "round's data)")
    if key in ASSERTED:
        detail += f"; tests: {ASSERTED[key]}"
    if passed is False:
        detail += ("; cause: it does not warn beyond the configuration: what it adds over the lag, mismatch and "
                   "estimator of the run does not beat a score that knows only those")
    if smoke:
        detail = f"quick fidelity is a smoke test: reported; {detail}"
    book.holds(f"warns-{key.replace(' ', '')}", f"{what} warns of a collapse beyond the configuration: its pooled "
               "AUC beats a score that knows only the configuration (lag, κ, estimator)",
               Interval(d[0], d[1], d[2], n=n), passed, detail, "evidence", n, diverged, "above", 0.0, "auc-versus",
               v["values"])


register_figure(Figure(FIGURE, "sequences", "Early warning of collapse: ROC of every logged signal and verl's alarms",
                       None, "notebooks/early_warning.py", plan=plan, data_spec=CASE_DATA))

__all__ = ["ASSERTED", "DIRECTIONS", "FIGURE", "FORM", "GRID", "HORIZON", "claims", "grid_config", "measure", "plan"]
