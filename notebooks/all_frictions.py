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
# # All four frictions at once
#
# Token reversal with every friction of the frictions figure switched on together, at moderate
# strengths: the actor D = 4 steps stale, a landmine bug at p_bug = 0.1 (the constant all-zeros answer
# reported with probability 1), Bernoulli reward corruption at p = 0.1 and rare discovery at
# p_disc = 0.02. Left: error vs step at one length. Right: for each seed, the longest H solved
# within the step budget — *solved* meaning a final error (mean of the last three logged steps)
# at most 0.2 — for each method.
#
# **Paper fidelity** (the committed figure): H ∈ {6, 8, 10}, 800 steps each, PG, PPO, PMPO and DG,
# 5 seeds; the longest-H claims are asserted as at full fidelity.
#
# **Fidelity.** Full: H ∈ {4, 6, 8, 10, 12}, 3000 steps each, PG, PPO, PMPO, IS-PG and DG,
# 10 seeds, sampled error (100 × 10). Quick (the test suite): the papers' H = 10 only, 200 steps,
# PG and DG, 5 seeds (one batched job per method), error on 20 prompts × 10 answers — the
# "longest H solved" panel then has a single length.
#
# **What is asserted at quick fidelity.** With one length the spec's claim (DG solves *longer*
# sequences than every baseline) cannot be asserted; it is asserted at full fidelity. At quick
# fidelity we assert that under all four frictions DG's final error at H = 10 is below PG's
# (paired over seeds; measured DG − PG: −0.27, −0.23, −0.25 at base seeds 0, 1, 2, paired
# t-intervals below 0), and report whether DG's final error is below the 0.2 "solved" threshold
# (measured 0.13, 0.14, 0.17: DG is still learning at step 200 under the four frictions, and at
# base seed 2 the interval reaches 0.2 — reported, not asserted).

# %%
import numpy as np
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, color, plt, save_figure, use_style
from simulations import fidelity_from_env, results
from simulations.sequences import FIDELITY, curves, final

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
frame = results("all-frictions")
book = ClaimBook("all-frictions")
use_style()
methods = list(f["all_methods"])
Hs = sorted(f["all_H"])
solved_at = f["solved"]
finals = {(m, H): final(frame[(frame.method == m) & (frame.H == H)], last=3).to_numpy() for m in methods for H in Hs}


def longest_solved(m):
    ok = np.array([finals[(m, H)] <= solved_at for H in Hs])  # [n_H, n_seeds]
    return np.array([max([H for H, hit in zip(Hs, col) if hit], default=0) for col in ok.T], dtype=float)


longest = {m: longest_solved(m) for m in methods}
print(pd.DataFrame({m: v for m, v in longest.items()}).rename_axis("seed").to_string())
print(pd.DataFrame([{"method": m, "H": H, "final error": finals[(m, H)].mean()} for m in methods for H in Hs])
      .pivot(index="H", columns="method", values="final error").round(3).to_string())

# %%
show_H = Hs[len(Hs) // 2]
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
for m in methods:
    steps, err = curves(frame[(frame.method == m) & (frame.H == show_H)])
    keep = steps > 0
    band(axes[0], steps[keep], err[:, keep], m)
axes[0].set(xscale="log", yscale="log", xlabel="step", ylabel="error 1 − E[R]",
            title=f"all four frictions, H = {show_H}")
axes[0].legend()
width = 0.8 / len(methods)
for i, m in enumerate(methods):
    x = np.arange(len(longest[m])) + (i - (len(methods) - 1) / 2) * width
    axes[1].bar(x, longest[m], width=width, color=color(m), label=m)
axes[1].set(xlabel="seed", ylabel=f"longest H with final error ≤ {solved_at}", yticks=[0, *Hs],
            title=f"longest H solved within the budget (H ∈ {Hs})")
axes[1].legend(fontsize=7)
save_figure(fig, "all-frictions", note=f"fidelity={fidelity}, {frame.replicate.nunique()} seeds")

# %% [markdown]
# ## Claims
# Paired over seeds (the same seed gives every method the same initial network).
#
# **At paper fidelity (H ∈ {6, 8, 10}, 800 steps, 5 seeds)**, measured at base seed 0: DG solves
# H = 10 in every seed (final error 0.047 [0.032, 0.063]); PMPO solves none of the lengths (0.45 at
# H = 10); PG's longest solved H is 5.6 on average (0.47 at H = 10). DG solves longer sequences than
# PG (+4.4 [0.3, 8.5]) and PMPO (PASS). **Against PPO the claim FAILs by the grid's ceiling:** PPO
# also solves H = 10 in every seed (final error 0.10 [0.04, 0.17]), so both reach the longest H
# the tier runs and the difference is exactly 0. Telling them apart needs H > 10 (full fidelity
# goes to 12).

# %%
for m in methods:
    if m == "DG":
        continue
    if fidelity != "quick":
        book.greater(f"dg-longer-than-{m.lower()}", f"under all four frictions DG solves longer sequences than {m}",
                     longest["DG"], longest[m])
    else:  # one length: compare the final errors at it
        mean_error = {k: np.mean([finals[(k, H)] for H in Hs], axis=0) for k in ("DG", m)}
        book.less(f"dg-lower-error-than-{m.lower()}",
                  f"under all four frictions DG's final error at H = {Hs} is below {m}'s (paired)",
                  mean_error["DG"], mean_error[m])
if fidelity == "quick":
    mid = Hs[len(Hs) // 2]
    book.report(book.below(f"dg-solves-H{mid}",
                           f"under all four frictions DG solves H = {mid} (final error below {solved_at})",
                           finals[("DG", mid)], solved_at))
H_top = max(Hs)
for m in methods:  # the numbers P2 reports: error at H = 10 and the longest H solved (README)
    book.measure(f"error-at-H{H_top}-{m.lower()}", f"under all four frictions, {m}'s final error at H = {H_top}",
                 finals[(m, H_top)], worse="high")
    if len(Hs) > 1:
        book.measure(f"longest-H-{m.lower()}", f"under all four frictions, the longest H ∈ {Hs} {m} solves "
                     f"(final error ≤ {solved_at}; 0 if none)", longest[m], worse="low")
print(book.table())
book.check()
