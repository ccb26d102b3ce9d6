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

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import color, curve, plt, use_style
from sandbox.analysis.stats import t_interval
from simulations import fidelity_from_env, results
from simulations.mnist import data_note, samples_parts, save

fidelity = fidelity_from_env()
runs = results("mnist-samples-per-image")
book = ClaimBook("mnist-samples-per-image")
use_style()
parts = runs.label.map(samples_parts)
runs["method"], runs["m"] = parts.str[0], parts.str[1]
final = int(runs.step.max())
end = runs[runs.step == final]


def final_errors(method, m):
    return end[(end.method == method) & (end.m == m)].sort_values("member").error.to_numpy()


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
save(fig, "mnist-samples-per-image", note=data_note(runs, fidelity) + f", m ∈ {[int(m) for m in ms]} and ∞")

# %% [markdown]
# ## Claims
#
# Paired over seeds (the runs of a seed share their initial weights).
#
# **What does not hold here.** The spec's claim — DG at one sample ends *strictly below* PG's
# infinite-sample floor — does not hold reliably in this simulation: at 400 steps (quick, 5 seeds),
# 500 steps (10 seeds) and 2000 steps (5 seeds) DG@1 and PG's exact update end within about a
# percentage point of each other, and which one is lower depends on the seeds. Exact PG loses only
# when a seed sits on a plateau with a digit class not yet learned: PG's exact update weights an
# image by π(y|x), so a class the policy never predicts is learned slowly, and that happens in a
# minority of seeds. What holds, and is asserted: DG at one sample is far below PG at one sample, and
# within one percentage point of PG's infinite-sample floor (the CI of the paired difference
# DG@1 − PG@∞ lies below +0.01): one sample per image with DG buys what PG needs the exact expected
# gradient for. (DG's own exact update, run at full fidelity, is the fair infinite-sample rival.)

# %%
dg1, pg1, pg_inf = final_errors("DG", 1), final_errors("PG", 1), final_errors("PG", np.inf)
book.less("dg1-below-pg1", f"DG at 1 sample per image ends below PG at 1 sample (step {final}, paired)", dg1, pg1,
          test="sign-flip", worse="high")
# Reported, not asserted: "within one point" was not established when the claims were fixed (an
# earlier run, whose interval reached above the margin); a claim is not promoted after seeing the
# data it would be decided on. The table shows this run's interval. (dg1-below-pg1 reads the same
# PG and DG runs at m = 1 as mnist-learning's dg-below-pg-final: one measurement, in both figures.)
book.report(book.less("dg1-within-1pp-of-pg-floor", "DG at 1 sample ends within one percentage point of PG's "
                      "infinite-sample floor (paired difference DG@1 − PG@∞ < 0.01)", dg1, pg_inf + 0.01,
                      worse="high"))
if (end.label == "DG exact").any():
    book.less("dg-exact-below-pg-exact", "DG's exact update (m = ∞) ends below PG's (paired)", final_errors("DG", np.inf), pg_inf,
              worse="high")
print({f"{method} m={m:g}": round(float(final_errors(method, m).mean()), 4) for method in ("PG", "DG")
       for m in sorted(end[end.method == method].m.unique())})
print(book.table())
book.check()
