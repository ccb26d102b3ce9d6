"""Training alarms as verl documents them, and whether they fire before a collapse.

verl's rollout-correction guide (``docs/algo/rollout_corr.md``, "Check for warning conditions" and
"Conditional Alerting Based on Metrics") warns when the mean IS weight leaves [0.5, 2.0]
(``rollout_corr/rollout_is_mean``), when the effective sample size falls below 0.3
(``rollout_corr/rollout_is_eff_sample_size``) and when |KL(π_rollout‖π_training)| exceeds 0.1
(``rollout_corr/kl``, the k1 estimate). ``ALARMS`` states each once, with the sandbox signal it
reads (``sandbox.diagnostics.SIGNALS``; ``ratio_mean`` for the mean weight) and the metric names
verl and TRL log for it (TRL logs no ESS and no signed KL of the sampler: "—"). ``UNITS`` names the
verl and TRL metric of every logged signal. ``ALARMS`` read the sandbox's own signals (the
``early-warning`` figure's data): ``kl_k1`` is verl's token ``kl`` exactly, the mean weight is
untruncated and the ESS sequence-level. ``VERL_ALARMS`` are all six checks of the guide's example, on
verl's metrics as verl computes them for a config (``Estimator.verl_metrics``): what ``sandbox check``
reports.

A run's collapse is ``sandbox.analysis.collapse``'s. An alarm **warns** of a collapse at step c when
it is on at some logged step t with c − ``horizon`` ≤ t < c; its lead is c − (the earliest such t).
A non-finite signal at a step where the run diverged counts as the alarm on (the metric itself
is broken, which any user sees); a signal a run does not log (NaN without divergence) never fires.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sandbox.analysis.collapse import collapse_event
from sandbox.estimators.trl_metrics import ASYNC_METRICS, METRICS

#: the metrics TRL's trainers log (TRL sets no alarm on them): a run's range of each is recorded
TRL_METRICS = METRICS + ASYNC_METRICS

#: the verl and TRL metric that corresponds to each logged signal ("—": none logs it)
UNITS = {
    "ess_frac": ("rollout_corr/rollout_is_eff_sample_size", "—"),
    "ratio_mean": ("rollout_corr/rollout_is_mean", "sampling/importance_sampling_ratio/mean"),
    "kl_k1": ("rollout_corr/kl", "—"),
    "kl_k3": ("rollout_corr/k3_kl", "—"),
    "log_ratio_abs_mean": ("—", "sampling/sampling_logp_difference/mean"),
    "log_ratio_abs_max": ("—", "sampling/sampling_logp_difference/max"),
    "grad_norm": ("actor/grad_norm", "grad_norm"),
    "cos_consecutive": ("—", "—"),
    "entropy": ("actor/entropy", "entropy"),
    "clip_frac": ("actor/pg_clipfrac", "clip_ratio/region_mean"),
    "mask_frac": ("—", "—"),
    "rollout_is_clip_frac": ("rollout_corr/rollout_is_ratio_fraction_high", "—"),
    "rollout_is_mask_frac": ("rollout_corr/rollout_rs_masked_fraction", "—"),
    # verl's own metrics, computed as verl 0.9.1 does (sandbox.estimators.rollout_corr): columns by verl's name
    **{f"rollout_corr/{m}": (f"rollout_corr/{m}", "—") for m in (
        "rollout_is_mean", "rollout_is_eff_sample_size", "rollout_is_veto_fraction", "rollout_is_std", "kl",
        "chi2_token")},
}


@dataclass(frozen=True)
class Alarm:
    """A documented threshold on one logged signal: on when the value (its absolute value with
    ``absolute``) is below ``low`` or above ``high``."""

    name: str
    column: str
    low: float | None = None
    high: float | None = None
    absolute: bool = False

    @property
    def verl(self) -> str:
        return UNITS[self.column][0]

    @property
    def trl(self) -> str:
        return UNITS[self.column][1]

    def on(self, values: Sequence[float], diverged: Sequence[bool] | None = None) -> np.ndarray:
        """Whether the alarm is on at each value; NaN is on only where ``diverged``."""
        v = np.asarray(values, dtype=float)
        x = np.abs(v) if self.absolute else v
        with np.errstate(invalid="ignore"):
            out = np.zeros(v.shape, dtype=bool)
            if self.low is not None:
                out |= x < self.low
            if self.high is not None:
                out |= x > self.high
        broken = ~np.isfinite(v)
        div = np.zeros(v.shape, dtype=bool) if diverged is None else np.asarray(diverged, dtype=bool)
        return np.where(broken, div, out)


ALARMS = (
    Alarm("ESS < 0.3", "ess_frac", low=0.3),
    Alarm("mean IS weight outside [0.5, 2]", "ratio_mean", low=0.5, high=2.0),
    Alarm("|KL| > 0.1", "kl_k1", high=0.1, absolute=True),
)


#: the six checks of verl's "Conditional Alerting Based on Metrics" example (docs/algo/rollout_corr.md,
#: ``check_rollout_correction_health``; the veto check as the guide had it before verl #4544, 2026-01-14,
#: which removed the token veto: no 0.9.1 run logs ``rollout_is_veto_fraction``), each on the column the
#: learner logs as verl computes the metric (``Estimator.verl_metrics``) — what ``sandbox check`` reports.
VERL_ALARMS = (
    Alarm("rollout_is_mean ∉ [0.5, 2]", "rollout_corr/rollout_is_mean", low=0.5, high=2.0),
    Alarm("rollout_is_eff_sample_size < 0.3", "rollout_corr/rollout_is_eff_sample_size", low=0.3),
    Alarm("rollout_is_veto_fraction > 0.1", "rollout_corr/rollout_is_veto_fraction", high=0.1),
    Alarm("rollout_is_std > 1", "rollout_corr/rollout_is_std", high=1.0),
    Alarm("|kl| > 0.1", "rollout_corr/kl", high=0.1, absolute=True),
    Alarm("chi2_token > 1", "rollout_corr/chi2_token", high=1.0),
)


def warning_lead(steps: Sequence[int], on: Sequence[bool], collapse_step: int | None, horizon: int) -> float:
    """Steps from the earliest logged step t with collapse − ``horizon`` ≤ t < collapse at which
    the alarm is on, to the collapse; NaN when there is no collapse or no such step."""
    if collapse_step is None:
        return math.nan
    s, a = np.asarray(steps), np.asarray(on, dtype=bool)
    window = (s >= collapse_step - horizon) & (s < collapse_step) & a
    return float(collapse_step - s[window].min()) if window.any() else math.nan


def alarm_table(frame: pd.DataFrame, metric: str, horizon: int, by: Sequence[str] = ("seed", "member"),
                budget: int | None = None, alarms: Sequence[Alarm] = ALARMS, **collapse_kwargs) -> pd.DataFrame:
    """One row per run (group of ``by``): its ``collapse_step`` (NaN: none) and, for each alarm,
    ``<name>: first`` (the first logged step it is on, NaN: never) and ``<name>: lead`` (steps
    before the collapse that it warned, NaN: no collapse or no warning within ``horizon``).
    ``collapse_kwargs`` go to ``collapse_event`` (direction and best value of ``metric``)."""
    missing = [c for c in ("step", metric, *by) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column(s) {missing}; columns: {sorted(frame.columns)}")
    if not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon must be an int ≥ 1 (learner steps), got {horizon!r}")
    budget = int(frame["step"].max()) if budget is None else budget
    rows = []
    for key, run in frame.sort_values("step").groupby(list(by), sort=True):
        steps = run["step"].to_numpy()
        event = collapse_event(steps, run[metric].to_numpy(dtype=float), budget=budget, **collapse_kwargs)
        diverged = run["diverged"].to_numpy(dtype=bool) if "diverged" in run else None
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), collapse_step=event.collapse_step)
        for alarm in alarms:
            on = alarm.on(run[alarm.column], diverged) if alarm.column in run else np.zeros(len(run), bool)
            row[f"{alarm.name}: first"] = float(steps[on].min()) if on.any() else math.nan
            row[f"{alarm.name}: lead"] = warning_lead(steps, on, event.collapse_step, horizon)
        rows.append(row)
    return pd.DataFrame(rows)


def run_alarms(frame: pd.DataFrame, cell: dict, budget: int) -> pd.DataFrame:
    """Per member of one scored run (``sandbox.scoring.runner``, in member order): its collapse step
    on the cell's metric and, for each of ``VERL_ALARMS`` whose column the run logs, its first step,
    its lead before the collapse (the whole run being the horizon) and ``flag``: 1 when it was first
    on within the first max(D, 1) updates, D the cell's largest delay — on from the start, a property
    of the configuration, not a warning — the columns ``sandbox check`` reports (``sandbox.check.alarms``)."""
    alarms = [a for a in VERL_ALARMS if a.column in frame]
    table = alarm_table(frame, cell["metric"], horizon=max(int(budget), 1), by=("member",), budget=int(budget),
                        alarms=alarms, higher_is_better=cell["best"] > cell["random"], best_possible=cell["best"])
    table = table.sort_values("member").drop(columns="member").reset_index(drop=True)
    start = max(cell_delay(cell), 1)
    for a in alarms:
        first = table[f"{a.name}: first"]
        table[f"{a.name}: flag"] = np.where(first.isna(), np.nan, (first <= start).astype(float))
    return table.rename(columns=lambda c: c if c == "collapse_step" else f"alarm {c}").astype(float)


def run_logged(frame: pd.DataFrame, columns: Sequence[str] = TRL_METRICS) -> pd.DataFrame:
    """Per member of one scored run (in member order), for each of ``columns`` the run logs (TRL's
    ``sampling/*`` metrics: TRL sets no alarm on them), its range over the logged steps and its value
    at the last: ``logged <name>: min|max|last`` — what ``sandbox check`` reports for a TRL config."""
    present = [c for c in columns if c in frame]
    members = sorted(frame["member"].unique())
    if not present:
        return pd.DataFrame(index=range(len(members)))
    ordered = frame.sort_values("step").groupby("member", sort=True)
    out = {}
    for c in present:
        out[f"logged {c}: min"] = ordered[c].min().to_numpy(dtype=float)
        out[f"logged {c}: max"] = ordered[c].max().to_numpy(dtype=float)
        out[f"logged {c}: last"] = ordered[c].last().to_numpy(dtype=float)
    return pd.DataFrame(out)


def cell_delay(cell: dict) -> int:
    """The largest delay D (learner updates) of a scored cell's delay schedule (0: synchronous)."""
    staleness = (cell.get("run") or {}).get("staleness") or {}
    return int(staleness.get("D", 0) or 0)


__all__ = ["ALARMS", "UNITS", "VERL_ALARMS", "Alarm", "alarm_table", "cell_delay", "run_alarms", "run_logged",
           "warning_lead"]
