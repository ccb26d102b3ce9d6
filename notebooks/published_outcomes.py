# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # published-outcomes: does the sandbox's verdict go the way published large runs went?
#
# Each row is a case of `simulations/cases/published_outcomes.yaml`: an outcome a large run
# published (VCPO, Precision-RL, oat, AReaL, M2PO, GAC, VESPO, the mismatch write-ups), mapped to
# a sandbox experiment by the file's one rule and judged by the rule the file declared before any
# run (docs/predictions.md). The file is the declaration of every row: its commit (fc80e3a, amended
# at 02b644e and, for the fidelity only, at 40b4d99, dbfb85b and b22639e) precedes every run.
#
# A case **agrees** when its one-sided test in the published direction has p < 0.05; it
# **disagrees** when the test goes the other way (opposite) or neither way (not reproduced); it is
# **inconclusive** — counted neither way — when its on-policy control did not learn or collapsed.
# At the 256-token scales only the controls run, at full fidelity (the amendments): a case is
# inconclusive there when its control does not learn — "does not appear at any size we can run".
#
# Each row's value is what its test reads: for a collapse contrast the counts of collapsed seeds per
# arm and Fisher's exact one-sided p (the value, against α = 0.05), with the conditional odds ratio
# and its exact 90% interval beside it only where it is defined (not when no seed, or every seed, of
# both arms collapsed); otherwise the paired t-interval, two-sided at 90% so that each bound is the
# one-sided 95% bound the test uses. At paper fidelity an agreement PASSes and a disagreement
# FAILs with its cause; quick fidelity (2 seeds, 80 steps) is a smoke test whose rows are reported,
# never counted.

# %%
import textwrap

import matplotlib.patches as patches

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import plt, save_figure, use_style
from simulations import fidelity_from_env, results
from simulations.cases.outcomes import CASE_FIDELITY, agreement
from simulations.published_outcomes import FIGURE, claims

fidelity = fidelity_from_env()
frame = results(FIGURE)
book = ClaimBook(FIGURE)
use_style()
case_results = claims(book, frame, fidelity)
scales = list(dict.fromkeys(r.scale for r in case_results))
cases = list(dict.fromkeys(r.case.id for r in case_results))

# %%
COLORS = {"agree": "#2e7d32", "disagree": "#c62828", "inconclusive": "0.6", "not run": "0.85"}
by = {(r.case.id, r.scale): r for r in case_results}
widths = {"case": 2.6, "outcome": 4.6, "measured": 4.6}
fig_w = sum(widths.values()) + 1.1 * len(scales)
fig, ax = plt.subplots(figsize=(fig_w, 0.7 * (len(cases) + 2.2)))
ax.set_xlim(0, fig_w)
ax.set_ylim(len(cases) + 1.2, -1)
ax.axis("off")
x = 0.0
for title, w in [("case", widths["case"]), ("published outcome", widths["outcome"]),
                 ("sandbox, reference scale: measurement [interval]", widths["measured"])]:
    ax.text(x + 0.05, -0.5, title, fontsize=7, weight="bold", va="center")
    x += w
for j, scale in enumerate(scales):
    ax.text(x + 1.1 * j + 0.55, -0.5, scale, fontsize=7, weight="bold", ha="center", va="center")
for i, cid in enumerate(cases):
    first = by.get((cid, "reference")) or next(r for r in case_results if r.case.id == cid)
    ax.text(0.05, i + 0.5, textwrap.fill(cid, 34), fontsize=5.5, va="center", family="monospace")
    ax.text(widths["case"] + 0.05, i + 0.5, textwrap.fill(first.case.outcome, 70), fontsize=4.8, va="center")
    words = first.measured or first.cause
    ax.text(widths["case"] + widths["outcome"] + 0.05, i + 0.5, textwrap.fill(words, 70), fontsize=4.8,
            va="center")
    for j, scale in enumerate(scales):
        r = by.get((cid, scale))
        if r is None:
            continue
        ax.add_patch(patches.Rectangle((x + 1.1 * j + 0.05, i + 0.1), 1.0, 0.8, color=COLORS[r.verdict]))
        ax.text(x + 1.1 * j + 0.55, i + 0.5, r.verdict, fontsize=5.5, ha="center", va="center",
                color="white" if r.verdict in ("agree", "disagree") else "black")
    ax.axhline(i + 1, color="0.9", lw=0.5)
k, n, rate, low, high = agreement(case_results)
smoke = CASE_FIDELITY[fidelity] == "quick"
ax.text(0.05, len(cases) + 0.6, (f"agreement rate {k}/{n} = {rate:.2f}, exact 95% interval [{low:.2f}, {high:.2f}]"
                                 if n else "no conclusive case: no agreement rate")
        + (" — quick fidelity: a smoke test, not the result" if smoke else ""), fontsize=7, weight="bold")
seeds = max(r.n for r in case_results if r.scale == "reference")
save_figure(fig, FIGURE, note=f"fidelity={fidelity} (case file tier {CASE_FIDELITY[fidelity]}), reference scale: "
            f"{seeds} seeds per arm; 256-token scales: the controls only",
            bands="collapse contrasts: Fisher's exact one-sided p with the counts (the conditional odds ratio's "
            "exact 90% interval only where defined); other cases: the paired t-interval at 90% (each bound the "
            "one-sided 95% bound its test reads); the agreement rate's exact Clopper–Pearson 95% interval")

# %% [markdown]
# ## Every case, every scale

# %%
for r in case_results:
    print(f"{r.case.id} [{r.scale}]: {r.verdict} ({r.rule})")
    if r.measured:
        print(f"    measured: {r.measured}")
    if r.cause:
        print(f"    cause: {r.cause}")

# %% [markdown]
# ## Claims

# %%
print(book.table())
book.check(require_asserted=not smoke and any(r.conclusive for r in case_results))  # all inconclusive: nothing to assert
