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
# # MNIST — final error vs samples per image
#
# B = 100 images per step, m samples per image (the Σπ² baseline), Adam 1e-3, for PG (REINFORCE)
# and DG (η = 1). As m → ∞ the batch update tends to the estimator's exact expected update on the
# batch's images; the task's `mode="exact"` computes that limit directly by enumerating the 10 digits
# of every image, weighted by π(a|x). For PG it is the exact policy gradient of the batch — PG's
# infinite-sample floor (dashed line). Paper fidelity: m ∈ {1, 10, 100}, 10,000 steps, 10 seeds;
# full fidelity adds m ∈ {2, 5, 20, 50} and DG's exact update.
#
# Claim (shared/spec/figures.md, "mnist-samples-per-image"): DG at 1 sample beats PG's floor.

# %%
import numpy as np

from sandbox.analysis.claims import Choice, ClaimBook
from sandbox.analysis.plotting import color, curve, plt, use_style
from sandbox.analysis.stats import t_interval
from simulations import fidelity_from_env, results
from simulations.mnist import CONFIRM, data_note, samples_parts, save

fidelity = fidelity_from_env()
runs = results("mnist-samples-per-image")
book = ClaimBook("mnist-samples-per-image")
use_style()
parts = runs.label.map(samples_parts)
runs["method"], runs["m"] = parts.str[0], parts.str[1]
runs["confirm"] = runs.label.str.endswith(CONFIRM)  # the confirmation runs, one base seed on
final = int(runs.step.max())
end = runs[runs.step == final]


def final_errors(method, m, confirm=False):
    rows = end[(end.method == method) & (end.m == m) & (end.confirm == confirm)]
    return rows.sort_values("member").error.to_numpy()


# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
ms = sorted(m for m in runs.m.unique() if np.isfinite(m))
for method in ("PG", "DG"):
    finals = np.column_stack([final_errors(method, m) for m in ms])  # [seeds, samples per image]
    curve(axes[0], ms, finals, f"{method}, m samples", color_=color(method))
    if (end.method == method).any() and np.isinf(end[end.method == method].m).any():
        iv = t_interval(final_errors(method, np.inf))  # 10 seeds: t, not a bootstrap
        axes[0].axhline(iv.estimate, color=color(method), ls="--", lw=1.2, label=f"{method}, exact (m = ∞)")
        axes[0].axhspan(iv.low, iv.high, color=color(method), alpha=0.12, lw=0)
axes[0].set(xscale="log", xlabel="samples per image m (log)", ylabel=f"greedy test error at step {final}",
            title="final error vs samples per image")
axes[0].legend(fontsize=7)
for label in ("PG", "DG", "PG exact", "DG exact"):
    sub = runs[runs.label == label].pivot(index="member", columns="step", values="error")
    if sub.empty:
        continue
    style = "--" if "exact" in label else "-"
    errors = np.nan_to_num(sub.to_numpy()[:, 1:], nan=1.0)  # a diverged seed counts at its worst, error 1
    axes[1].plot(sub.columns[1:], errors.mean(0), style, color=color(label),
                 label=label if "exact" in label else f"{label}, m = 1")
axes[1].set(xscale="log", yscale="log", xlabel="step", ylabel="greedy test error (mean over seeds)",
            title="learning curves")
axes[1].legend(fontsize=7)
confirming = " and, to confirm the claim, DG@1 and PG's floor on seeds + 1000" if runs.confirm.any() else ""
save(fig, "mnist-samples-per-image",
     note=data_note(runs, fidelity) + f", m ∈ {[int(m) for m in ms]} and ∞{confirming}")

# %% [markdown]
# ## Claims
#
# Paired over seeds (the runs of a seed share their initial weights); exact sign-flip intervals over
# 10 seeds, a diverged seed scored as error 1.
#
# The spec's claim, DG at one sample per image ends below PG's infinite-sample floor, did not hold
# reliably at short budgets: in earlier exploratory runs, not committed, at 400 steps (quick,
# 5 seeds), 500 steps (10 seeds) and 2000 steps (5 seeds) DG@1 and PG's exact update ended within
# about a percentage point of each other, and which one was lower depended on the seeds (one
# untested explanation: exact PG weights an image by π(y|x), so a digit class the policy never
# predicts is learned slowly). At the papers' 10,000 steps
# (paper fidelity) DG@1 ended below PG's floor on seeds 0–9. Because that was seen before the claim
# was asserted again (b59121d), the row on seeds 0–9 is reported, and paper and full fidelity assert
# the claim on seeds 1000–1009, run for this figure alone and never used to choose it. At quick
# fidelity it is reported, not asserted.
# (DG@1 against PG@1 is mnist-learning's claim on the same runs: one measurement, asserted there.)

# %%
dg1, pg_inf = final_errors("DG", 1), final_errors("PG", np.inf)
floor = book.less("dg1-below-pg-floor", f"DG at 1 sample per image ends below PG's infinite-sample floor "
                  f"(step {final}, paired)", dg1, pg_inf,
                  test="sign-flip", worse="high")
if end.confirm.any():
    choice = Choice("asserting the claim again after the 10,000-step runs", "b59121d", "seeds 0–9")
    book.selection(floor, choice)
    book.confirmed(book.less("dg1-below-pg-floor-confirmed", f"DG at 1 sample ends below PG's floor on seeds never used to "
                             f"choose the claim (seeds + 1000, step {final}, paired)", final_errors("DG", 1, True),
                             final_errors("PG", np.inf, True), test="sign-flip", worse="high"),
                   choice, "seeds 1000–1009")
else:
    book.report(floor)
if (end.label == "DG exact").any():
    book.less("dg-exact-below-pg-exact", "DG's exact update (m = ∞) ends below PG's (paired)", final_errors("DG", np.inf), pg_inf,
              worse="high")
print({f"{method} m={m:g}": round(float(final_errors(method, m).mean()), 4) for method in ("PG", "DG")
       for m in sorted(end[end.method == method].m.unique())})
print(book.table())
book.check(require_asserted=fidelity != "quick")
