"""The curves' plan, runs, tables and figure (``simulations.cases.curves``; rules in ``curves.yaml``).

    python -m simulations.cases.curves_report plan            # every (arm, lr) in run order, done or not
    python -m simulations.cases.curves_report run --next 3    # the next 3 points not yet on disk (two such
                                                              # processes side by side skip each other's points)
    python -m simulations.cases.curves_report report [--figure docs/curves.png]
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import pandas as pd
from scipy import stats

from simulations.cases.curves import (
    collapsed_seeds,
    critical_lr,
    declaration,
    load,
    median_interval,
    points,
    run,
    sign_test,
)


def plan() -> pd.DataFrame:
    """Every point in run order and whether its file exists."""
    return pd.DataFrame([{"key": p.key, "lr": p.lr, "base_seed": p.base_seed, "case": p.case or "(control)",
                          "done": p.path.is_file()} for p in points()])


def _cp(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(ci.low), float(ci.high)


def controls(data: dict) -> pd.DataFrame:
    """Per lr run for both controls: their collapse counts, the control's lag-10 KL (median over its
    seeds of the mean over steps ≤ 100) and whether the lr counts (the negative control's rule)."""
    d = declaration()
    neg, pos = d["controls"]["negative"], d["controls"]["positive"]
    rows = []
    for lr in sorted({lr for key, lr in data if key == neg} & {lr for key, lr in data if key == pos}):
        c_neg, c_pos = collapsed_seeds(data[neg, lr]), collapsed_seeds(data[pos, lr])
        early = data[neg, lr]
        lag_kl = float(early[early["step"] <= 100].groupby("member")["lag_k3"].mean().median())
        rows.append({"lr": lr, "negative_collapsed": int(c_neg.sum()), "positive_collapsed": int(c_pos.sum()),
                     "seeds": len(c_neg), "control_lag10_kl": lag_kl, "counts": int(c_neg.sum()) <= 1})
    return pd.DataFrame(rows)


def cases(data: dict, ctrl: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per declared case (curves.yaml ``rules``): the lrs counted, each arm's collapse
    counts and median critical lr with its interval, the sign test and the verdict."""
    from simulations.cases.amendments import second_round
    from simulations.cases.curves import arm_key

    d, r2 = declaration(), second_round()
    ctrl = controls(data) if ctrl is None else ctrl
    valid = set(ctrl.loc[ctrl["counts"], "lr"]) if not ctrl.empty else set()
    reached = bool(not ctrl.empty and (ctrl.loc[ctrl["counts"], "positive_collapsed"] >= 6).any())
    rows = []
    for entry in d["cases"]:
        case = r2.case(entry["case"])
        keys = {side: arm_key(case, entry[side]) for side in ("worse", "better")}
        lrs = sorted(valid & {lr for key, lr in data if key == keys["worse"]} & {lr for key, lr in data if key == keys["better"]})
        row = {"case": case.id, "worse": keys["worse"], "better": keys["better"], "lrs": lrs}
        if not lrs:
            rows.append({**row, "verdict": "not run"})
            continue
        crit = {}
        for side, key in keys.items():
            by_lr = {lr: collapsed_seeds(data[key, lr]) for lr in lrs}
            crit[side] = critical_lr(by_lr)
            row[f"{side}_counts"] = ", ".join(str(int(by_lr[lr].sum())) for lr in lrs)
            row[f"{side}_critical"] = median_interval(crit[side])
        test = sign_test(crit["worse"], crit["better"], d["rules"]["alpha"])
        if not reached:
            test["verdict"] = "inconclusive: the positive control does not collapse on the grid"
        rows.append({**row, **test})
    return pd.DataFrame(rows)


PENDING = "pending: agrees at base seed 0, base seed 1 not read yet"
UNCONFIRMED = "not reproduced: not confirmed at base seed 1"


def confirm(rows: pd.DataFrame, rows1: pd.DataFrame) -> pd.DataFrame:
    """The verdicts after the confirmation (curves.yaml ``confirmation.rule``): an agreement at base
    seed 0 stays "agree" only when base seed 1 agrees too; "pending" while base seed 1 is not run or
    not read (left out of the rate); ``UNCONFIRMED`` when base seed 1 reads otherwise."""
    at1 = dict(zip(rows1["case"], rows1["verdict"])) if not rows1.empty else {}
    out = rows.copy()
    for i, r in out.iterrows():
        if r["verdict"] == "agree":
            v1 = at1.get(r["case"], "not run")
            out.at[i, "verdict"] = "agree" if v1 == "agree" else PENDING if v1 == "not run" or v1.startswith(
                "inconclusive") else UNCONFIRMED
    return out


def rate(rows: pd.DataFrame) -> dict:
    """Every verdict's count and the agreement rate over the cases decided either way (agree,
    opposite, not reproduced), with its Clopper–Pearson 95% interval."""
    counts = rows["verdict"].value_counts().to_dict()
    decided = rows[rows["verdict"].str.startswith(("agree", "opposite", "not reproduced"))]
    k, n = int((decided["verdict"] == "agree").sum()), len(decided)
    return {"counts": counts, "agree": k, "decided": n, "rate": k / n if n else math.nan,
            "ci": _cp(k, n) if n else (math.nan, math.nan)}


def progress() -> dict:
    """How many declared runs are on disk, and the (base seed, lr) blocks still missing some."""
    pl = plan()
    todo = pl[~pl["done"]].groupby(["base_seed", "lr"], sort=False).size()
    return {"made": int(pl["done"].sum()), "declared": len(pl),
            "missing": [(int(b), float(lr), int(n)) for (b, lr), n in todo.items()]}


def front_page(read: dict, prog: dict) -> str:
    """The README's clause on the curves' rate, generated so that the front page cannot go stale."""
    r = rate(read["final"])
    lo, hi = r["ci"]
    left = prog["declared"] - prog["made"]
    runs = (f"all {prog['declared']} declared runs made" if not left
            else f"{left} of the {prog['declared']} declared runs still to make")
    return f"{r['agree']} of {r['decided']} agree, {r['rate']:.2f} [{lo:.2f}, {hi:.2f}], with {runs}"


def _lr(x: float) -> str:
    return "above the grid" if math.isinf(x) else "—" if math.isnan(x) else f"{x:.2g}"


def markdown(ctrl: pd.DataFrame, rows: pd.DataFrame) -> str:
    """The two tables of docs/predictions.md, "Curves"."""
    if ctrl.empty:
        out = ["No lr has been run for both controls yet: no case can be read."]
    else:
        out = ["| lr | control (negative) collapsed | lag16-seq-is (positive) collapsed "
               "| control's lag-10 KL, steps ≤ 100 | lr counts |", "|---|---|---|---|---|"]
    for r in ctrl.itertuples():  # empty when no control has run
        out.append(f"| {r.lr:g} | {r.negative_collapsed} of {r.seeds} | {r.positive_collapsed} of {r.seeds} "
                   f"| {r.control_lag10_kl:.2g} | {'yes' if r.counts else 'no: the lr alone collapses the control'} |")
    out += ["", "| case | worse arm: collapsed at each lr; critical lr, median [93% CI] | better arm: the same "
            "| lrs | n+ / n− / ties | p (one-sided) | verdict at this base seed |", "|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        if r.verdict == "not run":
            out.append(f"| `{r.case}` | `{r.worse}` | `{r.better}` | — | — | — | not run |")
            continue
        cells = []
        for side in ("worse", "better"):
            m, lo, hi = getattr(r, f"{side}_critical")
            where = _lr(m) if math.isinf(lo) else f"{_lr(m)} [{_lr(lo)}, {_lr(hi)}]"
            cells.append(f"`{getattr(r, side)}`: {getattr(r, f'{side}_counts')} of 8; {where}")
        out.append(f"| `{r.case}` | {cells[0]} | {cells[1]} | {', '.join(f'{x:g}' for x in r.lrs)} "
                   f"| {int(r.n_plus)} / {int(r.n_minus)} / {int(r.ties)} | {r.p_forward:.3g} | {r.verdict} |")
    return "\n".join(out)


PAGE = Path(__file__).resolve().parents[2] / "docs" / "predictions.md"
MARKER = "curves"


def confirmation_markdown(ctrl1: pd.DataFrame, rows1: pd.DataFrame) -> str:
    """The confirming base seed's tables: its controls and its cases (``markdown``), or a line when
    none of its runs exists."""
    base1 = declaration()["confirmation"]["base_seed"]
    if ctrl1.empty and (rows1["verdict"] == "not run").all():
        return f"**Confirmation at base seed {base1}:** not run yet."
    return f"**Confirmation at base seed {base1}** (the same rules on its own runs):\n\n" + markdown(ctrl1, rows1)


def diagnostics(by_seed: dict[int, dict]) -> str:
    """The confirmed cases' own control arms beside their two arms (curves.yaml
    ``confirmation.diagnostic``): collapsed seeds at each (base seed, lr) run for all three; empty
    when none is run."""
    from simulations.cases.curves import arm_key, diagnosed

    d = declaration()
    out = []
    for case in diagnosed():
        entry = next(e for e in d["cases"] if e["case"] == case.id)
        keys = [arm_key(case, entry["worse"]), arm_key(case, entry["better"]), arm_key(case, "control")]
        for seed, data in sorted(by_seed.items()):
            for lr in sorted(set.intersection(*({lr for k, lr in data if k == key} for key in keys))):
                flags = [collapsed_seeds(data[key, lr]) for key in keys]
                counts = [f"{int(f.sum())} of {len(f)}" for f in flags]
                out.append(f"| `{case.id}` | {seed} | {lr:g} | `{keys[0]}`: {counts[0]} | `{keys[1]}`: {counts[1]} "
                           f"| `{keys[2]}`: {counts[2]} |")
    if not out:
        return ""
    return ("**Each confirmed case's own control** (its worse arm's loss without the friction; a diagnostic "
            "that never changes a verdict), collapsed seeds:\n\n| case | base seed | lr | worse | better | "
            "the case's control |\n|---|---|---|---|---|---|\n" + "\n".join(out))


def readings() -> dict:
    """Each base seed's runs (``data``, ``data1``), controls and cases, and the confirmed verdicts
    (``final``), each read once."""
    d = declaration()
    data, data1 = load(d["mapping"]["base_seed"]), load(d["confirmation"]["base_seed"])
    ctrl, ctrl1 = controls(data), controls(data1)
    rows, rows1 = cases(data, ctrl), cases(data1, ctrl1)
    rows1 = rows1[rows1["case"].isin(d["confirmation"]["cases"])].reset_index(drop=True)
    return {"data": data, "ctrl": ctrl, "rows": rows, "data1": data1, "ctrl1": ctrl1, "rows1": rows1,
            "final": confirm(rows, rows1)}


def doc_block_text(read: dict | None = None) -> str:
    """docs/predictions.md's generated curves block: base seed 0's two tables, the confirmation's,
    the confirmed cases' own controls and the rate's counts on the confirmed verdicts."""
    read = readings() if read is None else read
    r = rate(read["final"])
    counts = ", ".join(f"{v} {k}" for k, v in sorted(r["counts"].items()))
    lo, hi = r["ci"]
    line = (f"**Rate on the regime's curves: {r['agree']} of {r['decided']} decided cases agree"
            + (f", {r['rate']:.2f} [{lo:.2f}, {hi:.2f}]** (exact Clopper–Pearson 95%)" if r["decided"] else "**")
            + f"; every verdict: {counts}.")
    d = declaration()
    diag = diagnostics({d["mapping"]["base_seed"]: read["data"], d["confirmation"]["base_seed"]: read["data1"]})
    prog = progress()
    missing = "; ".join(f"base seed {b} at {lr:g}: {n}" for b, lr, n in prog["missing"])
    made = (f"Runs made: {prog['made']} of the {prog['declared']} declared"
            + (f" (still to make, by block in run order: {missing})." if missing else ", all of them."))
    parts = [markdown(read["ctrl"], read["rows"]), confirmation_markdown(read["ctrl1"], read["rows1"]), diag, line,
             made]
    return "\n\n".join(part for part in parts if part)


def plot(data: dict, rows: pd.DataFrame, path, data1: dict | None = None) -> None:
    """One panel per case run (and one for the controls): collapsed share against lr, each arm (base
    seed 0 solid; the confirming base seed's runs, ``data1``, dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from simulations.cases.curves import arm_key, diagnosed

    d = declaration()
    run_rows = rows[rows["verdict"] != "not run"]
    own = {case.id: arm_key(case, "control") for case in diagnosed()}  # grey: a confirmed case's own control
    panels = [("controls", [(d["controls"]["positive"], "tab:red"), (d["controls"]["negative"], "tab:blue")])] + \
        [(r.case, [(r.worse, "tab:red"), (r.better, "tab:blue")] + ([(own[r.case], "0.5")] if r.case in own else []))
         for r in run_rows.itertuples()]
    grid = d["knob"]["grid"]
    cols = min(5, len(panels))
    rows_ = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(3.3 * cols, 2.9 * rows_), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, arms) in zip(axes.flat, panels):
        confirmed = title == "controls" or title in own  # base seed 1 ran only these panels' arms
        for key, colour in arms:
            for runs, style, tail in ((data, "o-", ""), ((data1 or {}) if confirmed else {}, "s--", " (base seed 1)")):
                lrs = sorted(lr for k, lr in runs if k == key)
                if lrs:
                    share = [collapsed_seeds(runs[key, lr]).mean() for lr in lrs]
                    ax.plot(lrs, share, style, color=colour, label=key + tail, alpha=1 if not tail else 0.6)
        ax.set(xscale="log", ylim=(-0.05, 1.05), xlim=(min(grid) / 1.3, max(grid) * 1.3), xlabel="lr")
        ax.set_xticks(grid, [f"{x:g}" for x in grid], fontsize=7)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(title.replace("_", " ")[:40], fontsize=8)
        ax.legend(fontsize=6, loc="upper left")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of 8 seeds collapsed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _marker(p) -> Path:
    return p.path.with_name(f".{p.path.stem}.running")


def _claim(p) -> bool:
    """Mark ``p`` as being run by this process, so that a second ``run`` started beside it skips
    it; a marker whose process is gone is taken over."""
    marker = _marker(p)
    marker.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                os.kill(int(marker.read_text() or 0), 0)
                return False  # another run holds it
            except (ProcessLookupError, ValueError):
                marker.unlink(missing_ok=True)
                continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plan", help="every point in run order, done or not")
    r = sub.add_parser("run", help="run points not yet on disk, in order")
    r.add_argument("--next", type=int, default=1, help="how many points to run (≥ 1)")
    rep = sub.add_parser("report", help="the controls' and the cases' tables, the rate")
    rep.add_argument("--figure", default=None)
    sub.add_parser("docs", help="rewrite docs/predictions.md's curves block and docs/curves.png from the committed runs")
    args = parser.parse_args(argv)
    if args.command == "plan":
        print(plan().to_string(index=False))
    elif args.command == "run":
        if args.next < 1:
            parser.error(f"--next: must be ≥ 1, got {args.next}")
        done = 0
        for p in points():
            if done == args.next:
                break
            if p.path.is_file() or not _claim(p):
                continue
            try:
                print(run(p), flush=True)
            finally:
                _marker(p).unlink(missing_ok=True)
            done += 1
    elif args.command == "docs":
        from simulations.regime_table import refresh_docs

        read = readings()
        PAGE.write_text(refresh_docs(PAGE.read_text(), {MARKER: doc_block_text(read)}))
        plot(read["data"], read["rows"], PAGE.parent / "curves.png", read["data1"])
        print(f"{PAGE} (block {MARKER}) and curves.png rewritten from the committed runs")
    else:
        read = readings()
        print(doc_block_text(read))
        if args.figure:
            plot(read["data"], read["rows"], args.figure, read["data1"])


if __name__ == "__main__":
    main()

__all__ = ["MARKER", "PAGE", "PENDING", "UNCONFIRMED", "cases", "confirm", "confirmation_markdown", "controls", "diagnostics",
           "doc_block_text", "front_page", "markdown", "plan", "progress", "plot", "rate", "readings"]
