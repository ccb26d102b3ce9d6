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
# # Kondo screening: learning vs backward-pass compute
#
# Kondo keeps the top `pct` of tokens by delight χ = A·ℓ (ties included) and trains on
# −Σ_kept A·log π_θ / (number of tokens); pct = 100% is REINFORCE. The screened trainer really
# skips the backward pass: the task scores the batch with a no-grad forward, takes the keep mask
# (`Kondo.keep_mask`), and runs the differentiable forward and backward only on the rows that hold
# a kept token (each prompt once); its loss and gradient equal the unscreened estimator's (tested).
# A control keeps the same fraction of tokens chosen uniformly at random.
#
# Left: error vs step. Middle: final error against the fraction of tokens (and of rows) that
# needed a backward pass. Right: the cost of one learner update at H = 10 on the spec model,
# screened vs unscreened — FLOPs counted by `torch.utils.flop_counter` (forward and backward
# matmuls and attention) and median wall time (single thread; noisy on a shared machine).
# The saving is bounded: the no-grad scoring forward stays, about a third of an unscreened update.
#
# **Paper fidelity** (the committed figure): H = 10, 600 steps (the paper's budget is not stated), 8
# seeds, pct ∈ {3, 10, 30, 100}%, uniform controls at 10% and 30%; claims asserted as at full
# fidelity.
#
# **Fidelity.** Full: H = 10, pct ∈ {1, 3, 10, 30, 100}%, uniform controls at 10% and 30%, DG as
# a reference, 10 seeds, 10,000 steps, timing over 50 repetitions. Quick: H = 2, pct ∈ {10, 30,
# 100}%, a uniform control at 30%, 4 seeds, 150 steps, exact error, timing over 5 repetitions.
#
# **What holds at quick fidelity.** With the reference model and the launcher's per-position
# reward, the H = 2 rehearsal does not separate the screened runs from REINFORCE within 150 steps
# (measured at base seeds 0, 1, 2: paired differences of the final error of Kondo 10% vs REINFORCE
# −0.12, −0.11, −0.03, every paired t-interval reaching 0). The learning claims and the training
# FLOP claim are *reported* at quick fidelity and asserted at paper and full fidelity; the two
# sanity checks (the FLOP model against exact counts, only kept rows through the backward pass) at
# every fidelity.

# %%
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, plt, save_figure, use_style
from sandbox.analysis.stability import seed_mean
from simulations import fidelity_from_env, results
from simulations.sequences import FIDELITY, budget_note, curves, final

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
frame = results("kondo")
book = ClaimBook("kondo")
use_style()
compute = frame[frame.label == "compute"].dropna(axis=1, how="all")
runs = frame[frame.label != "compute"]
def info(m):
    run = runs[runs.method == m]
    return run.priority.iloc[0], float(run.pct.iloc[0])


labels = sorted(runs.method.unique(), key=lambda m: (info(m)[0] == "uniform", m == "DG", info(m)[1]))
palette = {m: plt.cm.plasma(i / max(len(labels) - 1, 1)) for i, m in enumerate(labels)}
stats = pd.DataFrame([{"method": m, "pct": runs[runs.method == m].pct.iloc[0],
                       "priority": runs[runs.method == m].priority.iloc[0],
                       "final error": final(runs[runs.method == m], last=3).mean(),
                       "kept tokens": runs[(runs.method == m) & (runs.step > 0)].get("kept_frac", pd.Series([1.0])).mean(),
                       "backward rows": runs[(runs.method == m) & (runs.step > 0)].get("backward_rows_frac", pd.Series([1.0])).mean()}
                      for m in labels]).fillna(1.0)
print(stats.round(3).to_string(index=False))
cost = compute.pivot(index="pct", columns="mode", values=["flops", "seconds", "backward_rows"])
cost[("ratio", "flops")] = cost[("flops", "screened")] / cost[("flops", "full")]
cost[("ratio", "time")] = cost[("seconds", "screened")] / cost[("seconds", "full")]
print(cost.round(3).to_string())

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
for m in labels:
    steps, err = curves(runs[runs.method == m])
    keep = steps > 0
    style = "--" if info(m)[0] == "uniform" else "-"
    # a marker per curve: two screened runs can coincide (e.g. 30% and 100% once both have solved
    # the task), and a marker keeps the one drawn first visible under the other
    band(axes[0], steps[keep], err[:, keep], m, color_=palette[m], linestyle=style,
         marker="os^vD*"[labels.index(m) % 6], markevery=max(1, keep.sum() // 8), ms=4)
axes[0].set(xscale="log", yscale="log", xlabel="step", ylabel="error", title="error vs step")
axes[0].legend(fontsize=7)
for m in labels:
    row = stats[stats.method == m].iloc[0]
    marker = "s" if info(m)[0] == "uniform" else ("*" if m == "DG" else "o")
    axes[1].plot(row["kept tokens"], row["final error"], marker, color=palette[m], ms=8, label=m)
    axes[1].plot(row["backward rows"], row["final error"], marker, color=palette[m], ms=8, mfc="none")
axes[1].set(xscale="log", yscale="log", xlabel="fraction needing a backward pass (filled: tokens, open: rows)",
            ylabel="final error", title="learning vs backward compute")
pcts = cost.index.to_numpy()
axes[2].plot(pcts, cost[("ratio", "flops")], "o-", label="FLOPs screened / unscreened")
axes[2].plot(pcts, cost[("ratio", "time")], "s--", label="wall time screened / unscreened")
axes[2].axhline(1.0, color="0.5", lw=0.8)
axes[2].set(xscale="log", xlabel="pct kept", ylabel="ratio", title=f"cost of one update (H = {f['timing_H']})")
axes[2].legend(fontsize=7)
save_figure(fig, "kondo", note=f"fidelity={fidelity}, H = {f['H']}, "
            f"{budget_note('kondo', f['steps'], runs.replicate.nunique())}")

# %% [markdown]
# ## Claims
# - Screening by delight keeps the learning: with 10% and with 30% of the tokens kept, the final
#   error is lower than with every token kept (pct = 100%, i.e. REINFORCE) — ranking tokens by
#   delight would do what DG's gate does (paired over seeds, exact sign-flip test: final errors are
#   bimodal). **At paper fidelity both fail** (CLAIMS.md gives each cause): at 10% every seed is
#   still at error ≈ 0.36 at step 600, where REINFORCE has solved the task in 7 of 8 seeds; at 30%
#   every seed ends at ≤ 0.001, but so do most of REINFORCE's, and one stuck REINFORCE seed is not
#   enough to show "lower" at 8 seeds.
# - The priority matters: at the same 30%, screening by delight ends lower than a uniform choice.
# - The backward pass really shrinks *in training*: at pct = 10%, fewer than half of the rows run the
#   backward pass, averaged over the logged training steps (per seed; t-interval — a smooth average,
#   not bimodal). What that saves in FLOPs depends on how the kept rows share prompts; the exact
#   FlopCounterMode count of one update at a fresh policy is reported beside it (one state, not a
#   statistic over seeds), and that only kept rows run the backward pass is a sanity check.

# %%
paired = "sign-flip" if runs.replicate.nunique() >= 6 else "t"


def finals_of(m):
    return final(runs[runs.method == m], last=3).to_numpy()


def label_of(priority, pct):
    return next(m for m in labels if info(m) == (priority, pct))


full_label = label_of("delight", 1.0)
learning = [book.less(f"kondo{int(pct * 100)}-keeps-learning",
                      f"Kondo (delight, {pct:.0%} of tokens) ends with lower error than every token kept (REINFORCE)",
                      finals_of(label_of("delight", pct)), finals_of(full_label), test=paired, worse="high")
            for pct in (0.1, 0.3)]
learning.append(book.less("delight-beats-uniform",
                          "at 30% kept, screening by delight ends with lower error than a uniform choice",
                          finals_of(label_of("delight", 0.3)), finals_of(label_of("uniform", 0.3)), test=paired,
                          worse="high"))
ten = runs[(runs.method == label_of("delight", 0.1)) & (runs.step > 0)]
rows_through = seed_mean(ten, "backward_rows_frac", ["replicate"]).to_numpy()
learning.append(book.below("screened-rows-in-training", "in training at 10% kept, fewer than half of the rows run "
                           "the backward pass (mean over logged steps)", rows_through, 0.5, worse="high"))
if fidelity == "quick":  # not settled by the H = 2 rehearsal (see above): reported, not asserted
    for claim in learning:
        book.report(claim)
screened = compute[compute["mode"] == "screened"].set_index("pct")
share = screened.flops / compute[compute["mode"] == "full"].flops.max()
book.report(book.exact("screened-flops-fresh-policy", "one screened update at pct ≤ 10% costs this share of an "
                       "unscreened one's FLOPs at a fresh policy (FlopCounterMode, worst pct shown)",
                       float(share[share.index <= 0.1].max()), True, "an exact count at one state: reported"))
small = compute[(compute["mode"] == "screened") & (compute.pct <= 0.1)]
excess = small.backward_rows.to_numpy() - small.kept_rows.to_numpy()
book.exact("backward-rows-within-kept-rows", "screened: only kept rows run the backward pass (rows with A = 0 skip it too)",
           float(excess.max()), bool(excess.max() <= 1e-12), "max over pct of backward rows − kept rows ≤ 0")
training = stats[stats.priority == "delight"]
print("training: fraction of rows through the backward pass:")
print(training[["method", "backward rows"]].round(3).to_string(index=False))
print(book.table())
book.check()
