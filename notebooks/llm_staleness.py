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
# # A small causal LM under real asynchrony
#
# A tiny Qwen2-style model (2 layers, width 64, built in code — no downloads) learns to reverse
# three letters ("abb=" → "bba", reward = correct prefix / 3) from 8 prompts × 8 samples per step,
# Adam 3e-3. Rollouts come from Ray workers that sample while the learner updates, with the actor
# exactly s learner versions behind (fixed-lag mode; each token is stamped with its version). A
# policy that ignores the prompt reaches a reward of about 0.29.
#
# Paper fidelity (the committed figure) runs all five methods at s ∈ {0, 16}, 5 seeds, 150 steps.
# Quick fidelity runs REINFORCE, VCPO and DG at s = 16 only, 3 seeds, 100 steps (plus the
# staleness-0 equivalence and a bounded-mode run); full fidelity adds TIS and decoupled PPO,
# s ∈ {0, 2, 4, 8, 16}, 8 seeds, 150 steps. VCPO is as published (`simulations.methods.VCPO`):
# sequence-level truncated IS (C = 8), its ESS-scaled step and its minimum-variance baseline in the
# cheap ρ² form.
#
# **What we find.** Under a 16-step lag REINFORCE climbs to ≈0.7 and then collapses (to 0.3–0.4
# around step 80, in every seed we ran), while DG keeps improving. VCPO does better than
# REINFORCE on average but is *not* reliably stable in this tiny-LM setting: in exploratory runs
# (4 seeds, 120 steps) it dropped late in 3 of 4 seeds (to 0.35–0.57). The spec's claim "DG and
# VCPO stay stable where REINFORCE does not" is therefore asserted for DG; VCPO's numbers are
# reported below, not asserted. Stability is measured by the late reward (mean over the second half
# of training) and the drawdown (largest fall from the best reward reached so far). DG is not
# immune to fluctuations — one quick-fidelity seed fell from 0.82 to 0.60 at the last evaluation —
# so the claims are comparative, paired over seeds, rather than an absolute bound on DG's drawdown.

# %%
import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, color, curve, plt, save_figure, use_style
from sandbox.analysis.stability import stability
from simulations import fidelity_from_env, results

fidelity = fidelity_from_env()
frame = results("llm-staleness")
book = ClaimBook("llm-staleness")
use_style()
runs = frame[frame.label.str.contains(r"\| s=")].copy()
runs["method"] = runs.label.str.split(" | ").str[0]
runs["staleness"] = runs.label.str.split("s=").str[1].astype(int)
equivalence = frame[frame.label == "equivalence"].dropna(axis=1, how="all")
bounded = frame[frame.label == "bounded"].dropna(axis=1, how="all")
methods = list(dict.fromkeys(runs.method))
levels = sorted(runs.staleness.unique())
s_max = max(levels)


def curves(method, s, column, x="step"):
    sub = runs[(runs.method == method) & (runs.staleness == s)]
    table = sub.pivot(index="seed", columns="step", values=column)
    xs = sub.pivot(index="seed", columns="step", values=x).mean().to_numpy() if x != "step" else table.columns.to_numpy()
    return xs, table.to_numpy()


def stable(method, s):
    """Per seed: peak, final, late (mean over the 2nd half) and drawdown of the reward."""
    return stability(runs[(runs.method == method) & (runs.staleness == s)], "reward")


def late(method, s):
    return stable(method, s).late.to_numpy()


def drawdown(method, s):
    return stable(method, s).drawdown.to_numpy()


# %%
fig, axes = plt.subplots(1, 4, figsize=(14, 3.3))
for method in methods:
    c = color({"VCPO": "vcpo", "decoupled PPO": "decoupled_ppo"}.get(method, method.lower()))
    for s in levels:
        style = "-" if s == s_max else ":"
        if s not in (0, s_max):
            continue
        x, y = curves(method, s, "reward")
        band(axes[0], x, y, f"{method}, s={s}", color_=c, linestyle=style)
        x, y = curves(method, s, "reward", x="wall_time")
        axes[1].plot(x, np.nanmean(y, 0), style, color=c)
    dodge = 0.02 * max(levels[-1] - levels[0], 4) * (methods.index(method) - (len(methods) - 1) / 2)
    curve(axes[2], [s + dodge for s in levels], np.column_stack([late(method, s) for s in levels]), method, color_=c)
axes[0].axhline(0.29, color="0.5", lw=0.8, ls="--")
axes[0].set(xlabel="learner step", ylabel="reward (fresh prompts)", title="reward vs step")
axes[0].legend(fontsize=6)
axes[1].set(xlabel="wall-clock (s)", ylabel="reward", title="reward vs wall-clock")
axes[2].set(xlabel="max staleness s", ylabel="late reward (2nd half)", title="late reward vs staleness")
axes[2].set_xticks(levels)
axes[2].legend(fontsize=7)
b = bounded[bounded.step > 0]
axes[3].plot(b.step, b.staleness_mean, label="mean per token")
axes[3].plot(b.step, b.staleness_max, label="max per token")
axes[3].axhline(s_max, color="0.5", ls="--", lw=0.8, label="budget")
axes[3].set(xlabel="learner step", ylabel="staleness (versions)", title="bounded mode: measured staleness")
axes[3].legend(fontsize=7)
save_figure(fig, "llm-staleness", note=f"fidelity={fidelity}, {runs.seed.nunique()} seeds, Ray fixed-lag workers")

# %% [markdown]
# ## Claims (paired over seeds)
#
# **At paper fidelity (5 seeds, 150 steps, s ∈ {0, 16}) two of the comparisons do not hold: FAIL.**
# Measured at base seed 0, late reward per seed: REINFORCE 0.56, 0.29, 0.58, 0.28, 0.70 at s = 0
# and 0.43, 0.65, 0.41, 0.68, 0.26 at s = 16 — synchronous REINFORCE at this learning rate already
# collapses in 2 of 5 seeds, so the lag does not make it worse on average (+0.002 [−0.45, 0.45]).
# DG's late reward at s = 16 is 0.59–0.83 and beats REINFORCE's (+0.24 [0.06, 0.42], PASS), and
# REINFORCE falls by more than 0.15 from its best (PASS); but one DG seed also fell by 0.40 late in
# training, so "DG's drawdown is smaller" is −0.13 [−0.28, 0.02], not certified at 5 seeds.

# %%
eq = equivalence.iloc[0]
book.exact("staleness-0-equals-sync",
           f"max_staleness = 0 on Ray reproduces the synchronous run exactly ({int(eq.values_compared)} logged numbers; value: max |difference|)",
           eq.max_abs_diff, bool(eq.max_abs_diff == 0.0 and eq.same_shape), kind="sanity")
# At quick fidelity (3 seeds, all the CPU suite affords for a Ray LM run) a t-interval valid at that
# count is too wide to settle these comparisons, so they are reported there and asserted at full
# fidelity (8 seeds) and paper fidelity (5 seeds). The choice depends on the seed count only, never on
# the outcome.
settle = book.report if fidelity == "quick" else (lambda claim: claim)
settle(book.greater("dg-late-reward-beats-reinforce", f"at s = {s_max}, DG's late reward exceeds REINFORCE's",
                    late("DG", s_max), late("REINFORCE", s_max)))
settle(book.less("dg-drawdown-below-reinforce", f"at s = {s_max}, DG's drawdown is smaller than REINFORCE's (REINFORCE "
                 "collapses)", drawdown("DG", s_max), drawdown("REINFORCE", s_max)))
settle(book.above("reinforce-collapses", f"at s = {s_max}, REINFORCE falls by more than 0.15 from its best",
                  drawdown("REINFORCE", s_max), 0.15))
if 0 in levels:
    settle(book.less("reinforce-degrades-with-staleness", f"REINFORCE's late reward is lower at s = {s_max} than at s = 0",
                     late("REINFORCE", s_max), late("REINFORCE", 0)))
worst = bounded.staleness_max.max()
book.exact("bounded-respects-budget", f"bounded mode: no token is more than {s_max} versions stale (value: the worst)",
           worst, bool(worst <= s_max), kind="sanity")

# %% [markdown]
# VCPO at the largest staleness, reported with its intervals (not asserted: see above).

# %%
if "VCPO" in methods:
    book.report(book.greater("vcpo-late-reward-vs-reinforce", f"at s = {s_max}, VCPO's late reward exceeds REINFORCE's",
                             late("VCPO", s_max), late("REINFORCE", s_max)))
    book.report(book.less("vcpo-drawdown-vs-reinforce", f"at s = {s_max}, VCPO's drawdown is smaller than REINFORCE's",
                          drawdown("VCPO", s_max), drawdown("REINFORCE", s_max)))
print(book.table())
book.check()
