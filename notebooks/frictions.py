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
# # Token reversal under frictions: final error vs friction strength
#
# One panel per friction, each a seeded wrapper whose strength is swept (0 = no friction, bit for
# bit):
# - **staleness** — the actor samples with the learner's parameters from D steps ago (fixed D);
# - **actor bug** — landmine: with probability p a row's answer is replaced by the fixed wrong
#   answer — the reference's constant all-zeros answer (egg's launchers; the spec's default) — and
#   the actor reports probability 1 for it;
# - **reward corruption** — Bernoulli: with probability p the reward becomes 0 or 1 (50/50);
# - **rare discovery** — with probability p a row's answer is replaced by the correct answer,
#   reported with probability 1.
#
# Final error = 1 − E[R] of the friction-free learner, averaged over the last three logged steps.
# Methods: PG, PPO, PMPO, IS-PG (exact sequence IS with the *reported* μ), DG; on the staleness
# panel also VCPO (truncated IS, min-variance baseline, ESS-scaled step) and GAC (PPO + gradient
# alignment control).
#
# **Paper fidelity** (the committed figure): H = 10, 5 seeds (one job each), 500 steps, PG, PMPO and
# DG (+ VCPO and GAC under staleness), strengths D ∈ {0, 4, 16}, p_bug and p ∈ {0, 0.1, 0.3},
# p_disc ∈ {0, 0.01, 0.03}; every claim asserted as at full fidelity.
#
# **Fidelity.** Full: H = 10, 10 seeds, 3000 steps, strengths D ∈ {0, 4, 16, 64},
# p_bug ∈ {0, 0.1, 0.3, 0.5}, p ∈ {0, 0.1, 0.3, 0.5}, p_disc ∈ {0, 0.01, 0.03, 0.1}, all methods.
# Quick: H = 2, 4 seeds, 150 steps, one strength per panel (D = 16, p_bug = 0.3, p = 0.3,
# p_disc = 0.05), PG and DG only, exact error.
#
# **What the quick figure shows, and what it does not.** At H = 2 there are only four prompts and
# learning is dominated by PG collapsing onto a wrong deterministic answer for some prompt (a group
# whose samples all agree has zero advantage, so nothing undoes it); DG escapes more often. The
# frictions perturb that lottery in ways specific to this tiny problem: at V = 2 the landmine's
# wrong answer is the complement of the right one, so pushing it down is the supervised direction
# and the bug is not harmful; injected discoveries rescue PG as much as DG; staleness slows the
# collapse. With the reference model and the launcher's per-position reward the lottery is
# sharper still (an error of 0.125 or 0.5 is one prompt's position or one prompt gone wrong), and
# the comparison of DG and PG averaged over the four frictions does **not** hold across base seeds
# at quick fidelity (measured, 4 seeds each, paired difference DG − PG: −0.136, −0.062, −0.011 at
# base seeds 0, 1, 2; the paired t-interval reaches 0 at every one). It is *reported* at quick
# fidelity, not asserted. What is asserted at quick fidelity is that DG solves H = 2 (final error
# below the 0.2 "solved" threshold) under staleness, reward corruption and rare discovery; under
# the landmine bug it does not always (one prompt stays wrong in some seeds: reported). The spec's
# claims (DG lowest under every friction, by a large factor) are asserted at full fidelity only.

# %%
import numpy as np
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import color, plt, save_figure, use_style
from sandbox.analysis.stats import interval
from simulations import fidelity_from_env, results
from simulations.sequences import FIDELITY, PANELS, final

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
frame = results("frictions")
book = ClaimBook("frictions")
use_style()
base_methods = list(f["friction_methods"])


def final_errors(panel, method, strength):
    if strength == 0:  # the friction-free run is shared by every panel (and by reversal-learning)
        run = frame[(frame.method == method) & frame.panel.isna()]
    else:
        run = frame[(frame.panel == panel) & (frame.method == method) & (frame.strength == strength)]
    return final(run, last=3).to_numpy()


table = pd.DataFrame([{"panel": p, "method": m, "strength": s, "error": e, "replicate": i}
                      for p, strengths in f["strengths"].items()
                      for m in base_methods + list(f["friction_extra"].get(p, ()))
                      for s in strengths for i, e in enumerate(final_errors(p, m, s))])

# %%
fig, axes = plt.subplots(1, 4, figsize=(14, 3.3))
for ax, (panel, strengths) in zip(axes, f["strengths"].items()):
    positions = np.arange(len(strengths))
    for i, m in enumerate(base_methods + list(f["friction_extra"].get(panel, ()))):
        sub = table[(table.panel == panel) & (table.method == m)]
        means = [sub[sub.strength == s].error.mean() for s in strengths]
        ivs = [interval(sub[sub.strength == s].error.to_numpy()) for s in strengths]  # t, valid at 5 seeds
        offset = 0.06 * (i - 2)
        ax.errorbar(positions + offset, means, yerr=[[mu - max(iv.low, 1e-5) for mu, iv in zip(means, ivs)],  # log axis
                                                     [iv.high - mu for mu, iv in zip(means, ivs)]],
                    fmt="o-", color=color(m), label=m, capsize=2, ms=4)
    ax.set_xticks(positions, [str(s) for s in strengths])
    ax.set(xlabel={"staleness": "delay D", "actor bug": "p_bug", "reward corruption": "p",
                   "rare discovery": "p_disc"}[panel], ylabel="final error", title=panel)
    ax.set_yscale("log")
axes[0].legend(fontsize=7)
save_figure(fig, "frictions", note=f"fidelity={fidelity}, H = {f['H']}, {frame.replicate.nunique()} seeds",
            bands="error bars: 95% t-intervals of the mean over seeds")

# %% [markdown]
# ## Claims
# Paired over seeds (the same seed gives every method the same initial network and the same
# friction draws' generator). "Averaged over the frictions": per seed, the mean final error over
# the four panels at their largest strength.
#
# **At paper fidelity (H = 10, 500 steps, 5 seeds) what holds and what does not** (measured at base
# seed 0; DG − other, paired t-intervals):
# - staleness (D = 4, 16): DG ends at 0.004 and 0.031, below PG, PMPO, VCPO and GAC (all ≈ 0.2–0.5)
#   by 0.17–0.48 — PASS everywhere;
# - reward corruption (p = 0.1, 0.3): DG 0.003 and 0.23 against PG's 0.35 and 0.40 — PASS;
# - **actor bug: FAIL against PG.** With the reference's constant all-zeros landmine DG ends at
#   0.35 (p = 0.1) and 0.37 (p = 0.3), *above* PG's 0.15 and 0.26 (+0.21 [0.09, 0.32] at
#   p = 0.1). DG is below PMPO at p = 0.1 (PASS) but not certified at p = 0.3. P2 reports the
#   opposite ordering; within 500 steps the sandbox does not reproduce it. (With the complement
#   as the landmine, the earlier default, DG and PMPO did not learn at all while PG did.)
# - **rare discovery: FAIL by a ceiling.** Every method solves the task (final errors ≤ 0.07), so
#   DG's lead (−0.07 and −0.03 against PG) is not certified at 5 seeds;
# - **"by a large factor": FAIL.** Averaged over the four panels, DG is below PG and PMPO (PASS),
#   but the mean per-seed ratio is 1.8 [1.4, 2.2] for PG and 2.0 [1.7, 2.4] for PMPO, not
#   certified above 2 — the actor-bug panel pulls it down.

# %%
top = {p: max(s) for p, s in f["strengths"].items()}
per_seed = {m: np.mean([final_errors(p, m, top[p]) for p in f["strengths"]], axis=0) for m in base_methods}
for m in base_methods:
    if m == "DG":
        continue
    averaged = book.less(f"dg-below-{m.lower()}-averaged",
                         f"averaged over the four frictions, DG's final error is lower than {m}'s", per_seed["DG"], per_seed[m])
    if fidelity == "quick":  # a lottery at H = 2 (see above): reported, not asserted
        book.report(averaged)
    if fidelity != "quick":
        ratio = interval(per_seed[m] / np.maximum(per_seed["DG"], 1e-6), "mean")  # t: valid at 5 seeds
        book.holds(f"dg-large-factor-{m.lower()}", f"averaged over the frictions, {m}'s error is over twice DG's",
                   ratio, ratio.low > 2, f"mean over seeds of the per-seed ratio ({ratio.method})")
rows = []
for panel, strengths in f["strengths"].items():
    for m in base_methods + list(f["friction_extra"].get(panel, ())):
        if m == "DG":
            continue
        for s in strengths[1:]:
            dg, other = final_errors(panel, "DG", s), final_errors(panel, m, s)
            rows.append({"panel": panel, "strength": s, "vs": m, "DG": dg.mean(), m: other.mean(),
                         "dg_minus": (dg - other).mean()})
            if fidelity != "quick":
                book.less(f"dg-below-{m.lower()}-{panel.replace(' ', '-')}-{s}",
                          f"{panel} at {s}: DG's final error is lower than {m}'s", dg, other)
if fidelity == "quick":
    for panel in f["strengths"]:
        claim = book.below(f"dg-solves-H{f['H']}-{panel.replace(' ', '-')}",
                           f"{panel} at {top[panel]}: DG solves H = {f['H']} (final error below {f['solved']})",
                           final_errors(panel, "DG", top[panel]), f["solved"])
        if panel == "actor bug":
            book.report(claim)
print(pd.DataFrame(rows).round(3).to_string(index=False))
print({p: PANELS[p] for p in PANELS})
print(book.table())
book.check()
