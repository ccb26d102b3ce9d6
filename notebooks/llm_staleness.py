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
# three letters ("abb=" → "bba", reward = correct prefix / 3) from 8 prompts × 8 samples per step.
# Rollouts come from Ray workers that sample while the learner updates, with the actor exactly s
# learner versions behind (fixed-lag mode; each token is stamped with its version). A policy that
# ignores the prompt reaches a reward of about 0.29.
#
# **The learning rate was chosen at staleness 0 alone** (`simulations.llm.select_lr`, its runs in
# `simulations/data/llm_lr_selection.csv`): the largest Adam step of {1e-3, 1.5e-3, 2e-3, 3e-3} at
# which synchronous REINFORCE is stable in every one of 5 selection seeds (100–104, which no figure
# runs) — no seed's reward falls by more than 0.15 from its best within 150 steps. Measured: only
# 1.5e-3 is stable in every selection seed (largest drawdown 0.05); at 1e-3 three seeds wander by
# 0.18–0.19 (a slow learner's noisy evaluation), at 2e-3 one seed collapses (0.38), and at 3e-3,
# the previous setting, three do (0.27–0.49) — a lag could not have been blamed for a collapse
# there. The figure's own synchronous runs (seeds 0–7) were to confirm the choice (a claim).
# **At paper fidelity they do not**: synchronous REINFORCE falls by ≥ 0.15 in 3 of the 8 seeds, so
# the control is not stable, and the claims that lean on it — REINFORCE collapses at s = 16, it
# degrades with the lag, DG's drawdown is smaller — fail at 8 seeds (CLAIMS.md gives each cause).
# What holds: DG's late reward at s = 16 exceeds REINFORCE's.
#
# Paper fidelity (the committed figure) runs all five methods at s ∈ {0, 16}, 8 seeds, 150 steps.
# Quick fidelity runs REINFORCE, VCPO and DG at s = 16 only, 3 seeds, 100 steps (plus the
# staleness-0 equivalence and a bounded-mode run); full fidelity s ∈ {0, 2, 4, 8, 16}. VCPO is as
# published (the one method table, `sandbox.scoring.recipes`): sequence-level truncated IS (C = 8),
# its ESS-scaled step and its minimum-variance baseline in the cheap ρ² form.
#
# **What is compared.** Stability is measured by the late reward (mean over the second half of
# training) and the drawdown (largest fall from the best reward reached so far), per seed. Both are
# bimodal when runs collapse, so comparisons are paired over seeds and decided by the exact
# sign-flip test at paper fidelity (8 seeds); quick fidelity's 3 seeds settle nothing (reported).
# VCPO's claims are reported, not asserted: in exploratory runs at the old step it was not reliably
# stable in this tiny-LM setting, and no claim about it was stated before the paper run.

# %%
import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, color, curve, plt, save_figure, use_style
from sandbox.analysis.stability import stability
from simulations import fidelity_from_env, results
from simulations.llm import LR

fidelity = fidelity_from_env()
frame = results("llm-staleness")
book = ClaimBook("llm-staleness")
use_style()
runs = frame[frame.label.str.contains(r"\| s=")].copy()
runs["method"] = runs.label.str.split(" | ").str[0]
runs["staleness"] = runs.label.str.split("s=").str[1].astype(int)
# every column kept: a diverged run's columns are all NaN, and it must still be drawn and counted
equivalence = frame[frame.label == "equivalence"]
bounded = frame[frame.label == "bounded"]
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
axes[2].set(xlabel="staleness D (fixed lag)", ylabel="late reward (2nd half)", title="late reward vs staleness")
axes[2].set_xticks(levels)
axes[2].legend(fontsize=7)
b = bounded[bounded.step > 0]
axes[3].plot(b.step, b.staleness_mean, label="mean per token")
axes[3].plot(b.step, b.staleness_max, label="max per token")
axes[3].axhline(s_max, color="0.5", ls="--", lw=0.8, label="budget")
axes[3].set(xlabel="learner step", ylabel="staleness (versions)", title="bounded mode: measured staleness")
axes[3].legend(fontsize=7)
save_figure(fig, "llm-staleness", note=f"fidelity={fidelity}, {runs.seed.nunique()} seeds, {int(runs.step.max())} steps "
            f"(a tiny LM: no paper budget applies), Adam {LR:g}, Ray fixed-lag workers")

# %% [markdown]
# ## Claims (paired over seeds)

# %%
eq = equivalence.iloc[0]
book.exact("staleness-0-equals-sync",
           f"staleness 0 on Ray reproduces the synchronous run exactly ({eq.values_compared:.0f} logged numbers; value: max |difference|)",
           eq.max_abs_diff, bool(eq.max_abs_diff == 0.0 and eq.same_shape))
# At quick fidelity (3 seeds, all the CPU suite affords for a Ray LM run) no test valid at that count
# settles these comparisons, so they are reported there and asserted at paper and full fidelity (8
# seeds, the exact sign-flip test). The choice depends on the seed count only, never on the outcome.
settle = book.report if fidelity == "quick" else (lambda claim: claim)
paired = "sign-flip" if runs.seed.nunique() >= 6 else "t"
settle(book.greater("dg-late-reward-beats-reinforce", f"at s = {s_max}, DG's late reward exceeds REINFORCE's",
                    late("DG", s_max), late("REINFORCE", s_max), test=paired, worse="low"))
settle(book.less("dg-drawdown-below-reinforce", f"at s = {s_max}, DG's drawdown is smaller than REINFORCE's (REINFORCE "
                 "collapses)", drawdown("DG", s_max), drawdown("REINFORCE", s_max), test=paired, worse="high"))
settle(book.above("reinforce-collapses", f"at s = {s_max}, REINFORCE falls by more than 0.15 from its best",
                  drawdown("REINFORCE", s_max), 0.15, test=paired, worse="high"))
if 0 in levels:
    book.below("sync-control-stable", f"at s = 0 and the learning rate chosen at s = 0 on other seeds ({LR:g}), "
               "REINFORCE's drawdown stays below 0.15", drawdown("REINFORCE", 0), 0.15, test=paired, worse="high")
    settle(book.less("reinforce-degrades-with-staleness", f"REINFORCE's late reward is lower at s = {s_max} than at s = 0",
                     late("REINFORCE", s_max), late("REINFORCE", 0), test=paired, worse="low"))
# steps that log no staleness are NaN and skipped; a diverged run fails the check (its staleness is unknown)
diverged = "diverged" in bounded and bool(bounded["diverged"].astype("boolean").fillna(False).any())
worst = np.nan if diverged else bounded.staleness_max.max()
book.exact("bounded-respects-budget", f"bounded mode: no token is more than {s_max} versions stale (value: the worst)",
           worst, bool(worst <= s_max))

# %% [markdown]
# VCPO at the largest staleness, reported with its intervals (not asserted: see above).

# %%
if "VCPO" in methods:
    book.report(book.greater("vcpo-late-reward-vs-reinforce", f"at s = {s_max}, VCPO's late reward exceeds REINFORCE's",
                             late("VCPO", s_max), late("REINFORCE", s_max), test=paired, worse="low"))
    book.report(book.less("vcpo-drawdown-vs-reinforce", f"at s = {s_max}, VCPO's drawdown is smaller than REINFORCE's",
                          drawdown("VCPO", s_max), drawdown("REINFORCE", s_max), test=paired, worse="high"))
print(book.table())
book.check()
