"""Which of verl's documented alarms fired in each cell of a check, and how many steps before a
collapse — in the metric names verl and TRL log (``sandbox.analysis.alarms``).

Each scored training run records, per seed, its collapse step on the cell's metric and, for each
alarm, the first logged step it was on and the steps from its first firing before the collapse to
the collapse (``run_alarms``). Per cell: the seeds it fired in (and the median first step), the
collapses, and how many collapses it preceded (with the median steps before). A run collapses as
``sandbox.analysis.collapse`` defines it. How well these alarms warn across configurations is
measured by the ``early-warning`` figure (docs/predictions.md). Only the alarms whose metric the
configuration's run logs are shown (``Mapping.logs``: verl logs ``rollout_corr/*`` only with
``rollout.calculate_log_probs``, TRL its IS ratio only with the vLLM correction), with steps in the
trainer's steps (one per batch of ``deployment.reuse`` updates). The values are the sandbox's own
signals (``sandbox.analysis.alarms``), not recomputed as verl computes the metric it names.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sandbox.analysis.alarms import ALARMS


def cell_alarms(frame: pd.DataFrame, method: str) -> pd.DataFrame:
    """One row per cell of ``method``'s training runs: seeds, collapses, and per alarm the seeds it
    fired in, its median first step, the collapses it preceded and the median steps before them."""
    runs = frame[frame["method"] == method]
    if "collapse_step" not in runs:
        return pd.DataFrame()
    rows = []
    for cell, g in runs.groupby("cell", sort=False):
        collapsed = g["collapse_step"].notna()
        row = {"cell": cell, "seeds": len(g), "collapses": int(collapsed.sum())}
        for alarm in ALARMS:
            first, lead = g[f"alarm {alarm.name}: first"], g[f"alarm {alarm.name}: lead"]
            row[f"{alarm.name}: fired"] = int(first.notna().sum())
            row[f"{alarm.name}: first"] = first.median()
            row[f"{alarm.name}: warned"] = int((lead.notna() & collapsed).sum())
            row[f"{alarm.name}: before"] = lead[collapsed].median()
        rows.append(row)
    return pd.DataFrame(rows)


def logged(logs: Sequence[str] | None) -> list:
    """The alarms whose metric (verl's or TRL's name) the run logs; every alarm when not known."""
    return list(ALARMS) if logs is None else [a for a in ALARMS if a.verl in logs or a.trl in logs]


def _entry(row: pd.Series, name: str, per_step: int = 1) -> str:
    fired = row[f"{name}: fired"]
    if not fired:
        return "—"
    unit = "step" if per_step == 1 else "trainer step"
    text = f"{fired}/{row['seeds']} seeds (first at {unit} {row[f'{name}: first'] / per_step:.0f})"
    if row["collapses"]:
        text += f"; before {row[f'{name}: warned']}/{row['collapses']} collapses"
        if row[f"{name}: warned"]:
            text += f" by {row[f'{name}: before'] / per_step:.0f} {unit}s"
    return text


def alarm_markdown(frames: list[pd.DataFrame], method: str, logs: Sequence[str] | None = None,
                   per_step: int = 1) -> str:
    """The check.md section: one row per cell, one column per alarm whose metric the run logs
    (``logs``), in verl's and TRL's names; steps in trainer steps of ``per_step`` updates each."""
    tables = [cell_alarms(f, method) for f in frames]
    tables = [t for t in tables if not t.empty]
    alarms = logged(logs)
    if not alarms:
        return ("## Alarms\n\nThis run logs none of the metrics verl's documented alarms read (verl logs "
                "`rollout_corr/*` only with `rollout.calculate_log_probs`; TRL its IS ratio only with the vLLM "
                "correction), so none is shown.\n")
    head = ["| cell | collapses | " + " | ".join(f"{a.name} (verl `{a.verl}`; TRL `{a.trl}`)" for a in alarms) + " |",
            "|---|---|" + "---|" * len(alarms)]
    body = [f"| `{r['cell']}` | {r['collapses']}/{r['seeds']} | " + " | ".join(_entry(r, a.name, per_step)
                                                                               for a in alarms) + " |"
            for t in tables for _, r in t.iterrows()]
    if not body:
        return "## Alarms\n\nNo training run of these results recorded its alarms (they predate them).\n"
    return ("## Alarms\n\nverl's documented alarms on this config's runs, per cell: the seeds each fired in (its first "
            "step, median), and the collapses it preceded (median steps from its first firing to the collapse). "
            "How well they warn across configurations: the `early-warning` figure (docs/predictions.md).\n\n"
            + "\n".join(head + body) + "\n")


def alarm_line(frames: list[pd.DataFrame], method: str, logs: Sequence[str] | None = None) -> str:
    """One verdict line: which alarms whose metric the run logs (``logs``) fired where, and whether
    any preceded a collapse."""
    tables = [t for t in (cell_alarms(f, method) for f in frames) if not t.empty]
    if not tables:
        return "**Alarms**: not recorded in these results."
    if not logged(logs):
        return "**Alarms**: none shown — this run logs none of the metrics verl's alarms read."
    table = pd.concat(tables, ignore_index=True)
    parts = []
    for a in logged(logs):
        fired = table[table[f"{a.name}: fired"] > 0]
        if fired.empty:
            continue
        warned = int(table[f"{a.name}: warned"].sum())
        parts.append(f"{a.name} (`{a.verl}`) fired in {len(fired)} of {len(table)} cells"
                     + (f", before {warned} of {int(table['collapses'].sum())} collapses" if table["collapses"].sum() else ""))
    collapses = int(table["collapses"].sum())
    head = f"**Alarms** ({collapses} collapse{'s' if collapses != 1 else ''} in {int(table['seeds'].sum())} runs)"
    return f"{head}: " + ("; ".join(parts) if parts else "none of verl's alarms fired") + " (check.md, \"Alarms\")."


__all__ = ["alarm_line", "alarm_markdown", "cell_alarms"]
