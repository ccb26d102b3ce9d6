"""The scorecard: statistics of a scored frame, and the three files a person reads —
``scorecard.png`` (per-friction panels with intervals, the new estimator highlighted, the aggregate
IQM and the probability-of-improvement matrix), ``scorecard.md`` (a table to paste into a paper)
and ``scorecard.json`` (everything)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from sandbox.analysis.provenance import git_commit
from sandbox.scoring.battery import FRICTIONS, Battery
from sandbox.scoring.statistics import aggregate_iqm, cell_interval, probability_of_improvement

REQUIRED = ("method", "cell", "friction", "seed", "score", "diverged")


def summarise(frame: pd.DataFrame, battery: Battery, new: str, methods: list[str], seed: int = 0) -> dict:
    """Per-cell intervals, per-method aggregates (IQM over cells and seeds), mean score per
    friction, diverged counts, and P(row > column) for every pair of ``methods`` (``new`` first)."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"frame must have columns {list(REQUIRED)}; missing {missing}")
    if new not in methods:
        raise ValueError(f"new must be one of methods {methods}, got {new!r}")
    cells = [c.name for c in battery.cells]
    scores = {(m, c): g.sort_values("seed")["score"].to_numpy(float) for (m, c), g in frame.groupby(["method", "cell"])}
    absent = [(m, c) for m in methods for c in cells if (m, c) not in scores]
    if absent:
        raise ValueError(f"no scores for {len(absent)} (method, cell) pair(s), e.g. {absent[0]}")
    rows = []
    for cell in battery.cells:
        for m in methods:
            iv = cell_interval(scores[m, cell.name])
            sub = frame[(frame["method"] == m) & (frame["cell"] == cell.name)]
            row = {"cell": cell.name, "env": cell.env, "friction": cell.friction, "method": m,
                   "mean": iv.estimate, "low": iv.low, "high": iv.high, "seeds": iv.n,
                   "diverged": int(sub["diverged"].sum()), "raw": float(sub["value"].mean())}
            if "dropped" in sub and sub["dropped"].notna().any():  # admission cells: prompts never admitted
                row["dropped"] = float(sub["dropped"].mean())
            rows.append(row)
    per_method = {}
    for m in methods:
        sub = frame[frame["method"] == m]
        per_method[m] = {
            "iqm": asdict(aggregate_iqm([scores[m, c] for c in cells], seed=seed)),
            "frictions": {f: float(sub[sub["friction"] == f]["score"].mean()) for f in FRICTIONS
                          if (sub["friction"] == f).any()},
            "diverged": int(sub["diverged"].sum()), "runs": int(len(sub)),
        }
    poi = {a: {b: asdict(probability_of_improvement([scores[a, c] for c in cells], [scores[b, c] for c in cells],
                                                    seed=seed))
               for b in methods if b != a} for a in methods}
    return {"battery": battery.name, "version": battery.version, "hash": battery.hash, "commit": git_commit(),
            "new": new, "methods": methods, "seeds": {c.name: c.seeds for c in battery.cells},
            "cells": rows, "aggregate": per_method, "probability_of_improvement": poi}


def _iv(d: dict) -> str:
    return f"{d['estimate']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"


def markdown(summary: dict, code: str = "") -> str:
    """A paper-ready table: IQM and P(new > method) with 95% intervals, mean score per friction."""
    new, methods = summary["new"], summary["methods"]
    frictions = [f for f in FRICTIONS if f in summary["aggregate"][new]["frictions"]]
    seeds = sorted(set(summary["seeds"].values()))
    lines = [f"# Scorecard: `{new}` on battery `{summary['battery']}` v{summary['version']}", "",
             f"Battery `{summary['battery']}` v{summary['version']} (definition hash `{summary['hash'][:12]}`), "
             f"{len(summary['seeds'])} cells, {'/'.join(map(str, seeds))} seeds per cell, commit `{summary['commit']}`"
             + (f", code version `{code}`" if code else "") + ".",
             "Scores are in [0, 1] (0: a random policy, 1: the environment's best; probes: the signal fraction). "
             "IQM over every (cell, seed) score pooled, with a 95% stratified bootstrap interval; P(new > method) is the "
             "probability of improvement averaged over cells (95% stratified bootstrap). A diverged run "
             "scores 0 and is counted.", "",
             f"| method | IQM [95% CI] | P({new} > method) [95% CI] | " + " | ".join(frictions) + " | diverged |",
             "|---|---|---|" + "---|" * len(frictions) + "---|"]
    for m in methods:
        agg = summary["aggregate"][m]
        p = "—" if m == new else _iv(summary["probability_of_improvement"][new][m])
        name = f"**{m}**" if m == new else m
        cols = " | ".join(f"{agg['frictions'][f]:.3f}" for f in frictions)
        lines.append(f"| {name} | {_iv(agg['iqm'])} | {p} | {cols} | {agg['diverged']}/{agg['runs']} |")
    lines += ["", "Per cell: mean score [95% CI] (t-interval below 10 seeds).", "",
              "| cell | friction | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    by_cell: dict[str, dict] = {}
    for r in summary["cells"]:
        by_cell.setdefault(r["cell"], {"friction": r["friction"]})[r["method"]] = r
    for cell, entry in by_cell.items():
        vals = " | ".join(f"{entry[m]['mean']:.2f} [{entry[m]['low']:.2f}, {entry[m]['high']:.2f}]"
                          + (f" ({entry[m]['diverged']} div.)" if entry[m]["diverged"] else "") for m in methods)
        lines.append(f"| {cell} | {entry['friction']} | {vals} |")
    dropped = {cell: entry for cell, entry in by_cell.items() if any("dropped" in entry[m] for m in methods)}
    if dropped:
        lines += ["", "Prompts that never reached the learner under admission (mean fraction over seeds; the "
                  "score above is the error after the full step budget, so the lost updates count against it):", "",
                  "| cell | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
        lines += [f"| {cell} | " + " | ".join(f"{entry[m]['dropped']:.2f}" if "dropped" in entry[m] else "—"
                                            for m in methods) + " |" for cell, entry in dropped.items()]
    return "\n".join(lines) + "\n"


def figure(summary: dict):
    """Per-friction panels (cells × methods, mean and 95% interval), the aggregate IQM panel and
    the probability-of-improvement matrix; the new estimator is drawn black and larger."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sandbox.analysis.plotting import color, use_style

    use_style()
    new, methods = summary["new"], summary["methods"]
    frictions = [f for f in FRICTIONS if any(r["friction"] == f for r in summary["cells"])]
    fig = plt.figure(figsize=(max(3.0 * len(frictions), 9.0), 7.2))  # room for the two lower panels
    grid = fig.add_gridspec(2, 2 * len(frictions))
    offsets = np.linspace(-0.3, 0.3, len(methods)) if len(methods) > 1 else np.zeros(1)
    style = {m: ({"color": "black", "ms": 7, "zorder": 3, "mec": "black"} if m == new else
                 {"color": color(m), "ms": 4, "alpha": 0.8}) for m in methods}
    for i, friction in enumerate(frictions):
        ax = fig.add_subplot(grid[0, 2 * i:2 * i + 2])
        cells = list(dict.fromkeys(r["cell"] for r in summary["cells"] if r["friction"] == friction))
        for j, m in enumerate(methods):
            rs = [next(r for r in summary["cells"] if r["cell"] == c and r["method"] == m) for c in cells]
            x = np.arange(len(cells)) + offsets[j]
            mean = np.array([r["mean"] for r in rs])
            err = np.array([[r["mean"] - r["low"] for r in rs], [r["high"] - r["mean"] for r in rs]])
            ax.errorbar(x, mean, yerr=err, fmt="o", capsize=2, lw=1, label=m, **style[m])
        ax.set_xticks(range(len(cells)), [c.replace("/", "\n") for c in cells], fontsize=6)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(friction)
        if i == 0:
            ax.set_ylabel("score (mean, 95% CI)")
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    half = len(frictions)
    ax = fig.add_subplot(grid[1, :half])
    for j, m in enumerate(methods):
        iv = summary["aggregate"][m]["iqm"]
        ax.errorbar(iv["estimate"], j, xerr=[[iv["estimate"] - iv["low"]], [iv["high"] - iv["estimate"]]], fmt="o",
                    capsize=3, **style[m])
    ax.set_yticks(range(len(methods)), [f"▶ {m}" if m == new else m for m in methods])
    ax.invert_yaxis()
    ax.set_xlabel("IQM score over cells and seeds (95% stratified bootstrap CI)")
    ax.set_title("aggregate")
    ax = fig.add_subplot(grid[1, half:])
    poi = summary["probability_of_improvement"]
    matrix = np.array([[np.nan if a == b else poi[a][b]["estimate"] for b in methods] for a in methods])
    image = ax.imshow(matrix, cmap="RdBu", vmin=0, vmax=1)
    for a in range(len(methods)):
        for b in range(len(methods)):
            if a != b:
                iv = poi[methods[a]][methods[b]]
                sure = iv["low"] > 0.5 or iv["high"] < 0.5
                ax.text(b, a, f"{matrix[a, b]:.2f}" + ("*" if sure else ""), ha="center", va="center", fontsize=6)
    ax.set_xticks(range(len(methods)), methods, rotation=45, ha="right")
    ax.set_yticks(range(len(methods)), methods)
    ax.set_title("P(row > column)\n* its 95% CI excludes ½", fontsize=9)
    ax.grid(False)
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(f"{new} on battery {summary['battery']} v{summary['version']} (commit {summary['commit']})")
    return fig


def write(summary: dict, frame: pd.DataFrame, out: str | Path, code: str = "") -> list[Path]:
    """Write ``scorecard.png``, ``scorecard.md`` and ``scorecard.json`` (summary and tidy scores) to ``out``."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fig = figure(summary)
    paths = [out / "scorecard.png", out / "scorecard.md", out / "scorecard.json"]
    fig.savefig(paths[0])
    plt.close(fig)
    paths[1].write_text(markdown(summary, code))
    columns = [c for c in ("method", "cell", "env", "friction", "seed", "value", "score", "diverged", "dropped")
               if c in frame.columns]
    scores = frame[columns].astype(object).where(frame[columns].notna(), None)  # NaN → null: strict JSON
    data = {**summary, "code": code, "scores": scores.to_dict(orient="records")}
    paths[2].write_text(json.dumps(data, indent=1, default=float))
    return paths
