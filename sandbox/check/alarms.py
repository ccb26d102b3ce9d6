"""Which of verl's example alarms fired in each cell of a check, and how many steps before a
collapse — on verl's own metrics, computed as verl 0.9.1 computes them.

verl's rollout-correction guide ends with ``check_rollout_correction_health``: six checks on the
``rollout_corr/*`` metrics (``sandbox.analysis.alarms.VERL_ALARMS``). The config's runs log those
metrics as verl computes them (``Estimator.verl_metrics``, ``sandbox.estimators.rollout_corr``): at
the config's ``rollout_is`` level, with its truncation, from π_old (decoupled) or π_θ (bypass)
against μ. Only the alarms whose metric the user's own run logs are shown (``Mapping.logs``: verl
logs ``rollout_corr/*`` only with the engine's log-probs, the IS-weight metrics only at a
``rollout_is`` level, and no 0.9.1 run logs a veto fraction); TRL logs none of them.

TRL 1.16.0 logs other metrics and sets no alarm on them (``sandbox.estimators.trl_metrics``): its
GRPOTrainer, with its vLLM correction, ``sampling/*`` — the difference |log π_old − log μ| and the
weight it applies —, its AsyncGRPOTrainer ``ratio`` and ``kl`` of π_θ against vLLM's μ. A TRL
config's runs log those as TRL computes them, and the check shows their range per cell under TRL's
names, with no alarm (``trl_markdown``, ``trl_line``).

Each scored training run records, per seed, its collapse step on the cell's metric and, per alarm,
the first logged step it was on, the steps from that first firing to the collapse, and whether it
was on from the first D updates (``run_alarms``): such an alarm is a **configuration flag** (the
lag or mismatch the config sets), not a warning. Steps are in the trainer's steps (one per batch of
``deployment.reuse`` updates). A run collapses as ``sandbox.analysis.collapse`` defines it. How well
such signals warn across configurations: the ``early-warning`` figure (docs/predictions.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sandbox.analysis.alarms import VERL_ALARMS
from sandbox.analysis.alarms import TRL_METRICS

#: why a verl check is missing from a run's logs (beyond "calculate_log_probs is off")
NOT_LOGGED = {"rollout_corr/rollout_is_veto_fraction": "no verl 0.9.1 run logs it (verl #4544 removed the token veto)"}
IS_ONLY = ("rollout_corr/rollout_is_mean", "rollout_corr/rollout_is_eff_sample_size", "rollout_corr/rollout_is_std")


def _recorded(runs: pd.DataFrame) -> list:
    return [a for a in VERL_ALARMS if f"alarm {a.name}: first" in runs]


def cell_alarms(frame: pd.DataFrame, method: str) -> pd.DataFrame:
    """One row per cell of ``method``'s training runs: seeds, collapses, and per recorded alarm the
    seeds it flagged (on from the first D updates), the seeds it fired in later (median first step),
    the collapses such a later firing preceded and the median steps before them."""
    runs = frame[frame["method"] == method]
    if "collapse_step" not in runs:
        return pd.DataFrame()
    rows = []
    for cell, g in runs.groupby("cell", sort=False):
        collapsed = g["collapse_step"].notna()
        row = {"cell": cell, "seeds": len(g), "collapses": int(collapsed.sum())}
        for alarm in _recorded(g):
            first, lead = g[f"alarm {alarm.name}: first"], g[f"alarm {alarm.name}: lead"]
            flag = g.get(f"alarm {alarm.name}: flag", pd.Series(0.0, index=g.index)).fillna(0.0) > 0
            later = first.notna() & ~flag
            row[f"{alarm.name}: flagged"] = int(flag.sum())
            row[f"{alarm.name}: fired"] = int(later.sum())
            row[f"{alarm.name}: first"] = first[later].median()
            row[f"{alarm.name}: warned"] = int((lead.notna() & collapsed & later).sum())
            row[f"{alarm.name}: before"] = lead[collapsed & later].median()
        rows.append(row)
    return pd.DataFrame(rows)


def logged(logs: Sequence[str] | None) -> list:
    """verl's alarms whose metric the run logs (``logs``: verl's names); every one when not known."""
    return list(VERL_ALARMS) if logs is None else [a for a in VERL_ALARMS if a.verl in logs]


def _entry(row: pd.Series, name: str, per_step: int = 1) -> str:
    if f"{name}: fired" not in row:
        return "not recorded"
    unit = "step" if per_step == 1 else "trainer step"
    parts = []
    if row[f"{name}: flagged"]:
        parts.append(f"configuration flag: on from the start in {row[f'{name}: flagged']}/{row['seeds']} seeds")
    fired = row[f"{name}: fired"]
    if fired:
        text = f"fired later in {fired}/{row['seeds']} seeds (first at {unit} {row[f'{name}: first'] / per_step:.0f})"
        if row["collapses"]:
            text += f"; before {row[f'{name}: warned']}/{row['collapses']} collapses"
            if row[f"{name}: warned"]:
                text += f" by {row[f'{name}: before'] / per_step:.0f} {unit}s"
        parts.append(text)
    return "; ".join(parts) or "—"


def _missing(logs: Sequence[str] | None) -> str:
    """The verl checks not shown, and why."""
    if logs is None:
        return ""
    why, verl = [], [m for m in logs if m.startswith("rollout_corr/")]
    for a in VERL_ALARMS if verl else ():
        if a.verl in logs:
            continue
        if a.verl in NOT_LOGGED:
            why.append(f"`{a.verl}`: {NOT_LOGGED[a.verl]}")
        elif a.verl in IS_ONLY:
            why.append(f"`{a.verl}`: logged only with a `rollout_is` level, which this config does not set")
    if not verl:
        why.append("`rollout_corr/*`: not logged by this run (verl logs them only with the engine's log-probs, "
                   "`rollout.calculate_log_probs`; TRL logs none of them)")
    return "Not shown: " + "; ".join(why) + ".\n" if why else ""


TRL_NONE = ("this TRL run logs no off-policy metric (TRL 1.16.0's GRPOTrainer logs its `sampling/*` only with "
            "`use_vllm` and `vllm_importance_sampling_correction`) and none of verl's `rollout_corr/*`")


def trl_cells(frames: list[pd.DataFrame], method: str) -> pd.DataFrame:
    """One row per cell of ``method``'s runs: for each TRL metric the runs logged, the median over
    seeds of each run's smallest, largest and last logged value (``logged <name>: min|max|last``)."""
    rows = []
    for frame in frames:
        runs = frame[frame["method"] == method]
        names = [m for m in TRL_METRICS if f"logged {m}: max" in runs]
        for cell, g in runs.groupby("cell", sort=False):
            if names and g[f"logged {names[0]}: max"].notna().any():
                rows.append({"cell": cell, **{f"{m}: {end}": g[f"logged {m}: {end}"].median()
                                              for m in names for end in ("min", "max", "last")}})
    return pd.DataFrame(rows)


HOW = {"sampling/importance_sampling_ratio/max": "GRPOTrainer logs these with its vLLM correction, computed here "
       "as TRL computes them (`sandbox.estimators.trl_metrics`: the recomputed π_old against vLLM's μ; the ratio is "
       "the weight the loss applies)",
       "ratio": "AsyncGRPOTrainer logs these in its loss, computed here as TRL computes them "
       "(`sandbox.estimators.trl_metrics`: π_θ against π_old = vLLM's μ; `ratio` untruncated, `kl` the k3 estimate)"}


def trl_markdown(frames: list[pd.DataFrame], method: str, logs: Sequence[str]) -> str:
    """check.md's section for a TRL config: TRL's own metrics per cell (range over the logged steps,
    last value; medians over seeds), under TRL's names; no alarm (TRL sets none)."""
    if not any(m in logs for m in TRL_METRICS):
        return f"## Alarms\n\nNone: {TRL_NONE}.\n"
    table = trl_cells(frames, method)
    if table.empty:
        return "## Alarms\n\nNone (TRL sets no alarm); the metrics its run logs were not recorded in these results.\n"
    names = [m for m in TRL_METRICS if f"{m}: max" in table]
    head = ["| cell | " + " | ".join(f"`{m}`" for m in names) + " |", "|---|" + "---|" * len(names)]
    body = [f"| `{r['cell']}` | " + " | ".join(f"{r[f'{m}: min']:.3g}–{r[f'{m}: max']:.3g} ({r[f'{m}: last']:.3g})"
                                                for m in names) + " |" for _, r in table.iterrows()]
    how = "; ".join(text for m, text in HOW.items() if m in names)
    return (f"## Alarms\n\nNone: TRL 1.16.0 sets no alarm on the metrics it logs. Its {how}. Per cell: the range over "
            "the logged steps (last value), medians over seeds.\n\n" + "\n".join(head + body) + "\n")


def trl_line(frames: list[pd.DataFrame], method: str, logs: Sequence[str]) -> str:
    """The verdict line for a TRL config: no alarm (TRL sets none), and where the largest values of
    what its run logs were."""
    if not any(m in logs for m in TRL_METRICS):
        return f"**Alarms**: none shown — {TRL_NONE}."
    table = trl_cells(frames, method)
    if table.empty:
        return "**Alarms**: none (TRL sets none); the metrics its run logs were not recorded in these results."
    parts = []
    for m in ("sampling/importance_sampling_ratio/max", "sampling/sampling_logp_difference/max", "ratio", "kl"):
        if f"{m}: max" in table:
            top = table.loc[table[f"{m}: max"].idxmax()]
            parts.append(f"`{m}` reaches {top[f'{m}: max']:.3g} (`{top['cell']}`)")
    return ("**Alarms**: none — TRL 1.16.0 sets no alarm on what it logs. Its metrics, as TRL computes them "
            "(check.md, \"Alarms\"): " + "; ".join(parts) + " (medians over seeds of each run's largest).")


def alarm_markdown(frames: list[pd.DataFrame], method: str, logs: Sequence[str] | None = None,
                   per_step: int = 1, source: str = "verl") -> str:
    """The check.md section: one row per cell, one column per verl alarm whose metric the run logs
    (``logs``); steps in trainer steps of ``per_step`` updates each; configuration flags apart. For
    a TRL config (``source='trl'``), TRL's own metrics (``trl_markdown``)."""
    if source == "trl":
        return trl_markdown(frames, method, logs or ())
    tables = [t for t in (cell_alarms(f, method) for f in frames) if not t.empty]
    alarms = logged(logs)
    if not alarms:
        return "## Alarms\n\nNone of verl's example alarms reads a metric this run logs.\n\n" + _missing(logs)
    head = ["| cell | collapses | " + " | ".join(f"{a.name} (`{a.verl}`)" for a in alarms) + " |",
            "|---|---|" + "---|" * len(alarms)]
    body = [f"| `{r['cell']}` | {r['collapses']}/{r['seeds']} | " + " | ".join(_entry(r, a.name, per_step)
                                                                               for a in alarms) + " |"
            for t in tables for _, r in t.iterrows()]
    if not body:
        return "## Alarms\n\nNo training run of these results recorded its alarms (they predate them).\n"
    return ("## Alarms\n\nverl's example alarms (`check_rollout_correction_health`, docs/algo/rollout_corr.md) on "
            "verl's metrics as verl 0.9.1 computes them for this config, per cell: a **configuration flag** where "
            "the alarm was on from the first D updates (D the cell's largest delay; not a warning), else the seeds "
            "it fired in later (first step, median) and the collapses it preceded (median steps from its first "
            "firing to the collapse). How well such signals warn across configurations: the `early-warning` "
            "figure (docs/predictions.md).\n\n" + "\n".join(head + body) + "\n\n" + _missing(logs))


def alarm_line(frames: list[pd.DataFrame], method: str, logs: Sequence[str] | None = None,
               source: str = "verl") -> str:
    """One verdict line: which of verl's alarms whose metric the run logs (``logs``) flagged the
    configuration or fired later, and whether a later firing preceded a collapse; for a TRL config
    (``source='trl'``), ``trl_line``."""
    if source == "trl":
        return trl_line(frames, method, logs or ())
    tables = [t for t in (cell_alarms(f, method) for f in frames) if not t.empty]
    if not tables:
        return "**Alarms**: not recorded in these results."
    if not logged(logs):
        return "**Alarms**: none shown — this run logs none of the metrics verl's example alarms read."
    table = pd.concat(tables, ignore_index=True)
    if not any(f"{a.name}: fired" in table for a in logged(logs)):
        return "**Alarms**: not recorded in these results (they predate verl's metrics in the runs)."
    collapses = int(table["collapses"].sum())
    parts = []
    for a in logged(logs):
        if f"{a.name}: fired" not in table:
            continue
        flagged = table[table[f"{a.name}: flagged"] > 0]
        fired = table[table[f"{a.name}: fired"] > 0]
        if not flagged.empty:
            parts.append(f"{a.name} flags the configuration (on from the start) in {len(flagged)} of {len(table)} cells")
        if not fired.empty:
            warned = int(table[f"{a.name}: warned"].sum())
            parts.append(f"{a.name} fired later in {len(fired)} of {len(table)} cells"
                         + (f", before {warned} of {collapses} collapses" if collapses else ""))
    head = f"**Alarms** ({collapses} collapse{'s' if collapses != 1 else ''} in {int(table['seeds'].sum())} runs)"
    return f"{head}: " + ("; ".join(parts) if parts else "none of verl's alarms fired") + " (check.md, \"Alarms\")."


__all__ = ["alarm_line", "alarm_markdown", "cell_alarms", "logged", "trl_cells", "trl_line", "trl_markdown"]
