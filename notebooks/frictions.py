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
#   answer — the reference's constant all-zeros answer (egg's launchers; the task's default) — and
#   the actor reports probability 1 for it (no penalty here: the actor-bug map adds one);
# - **reward corruption** — Bernoulli: with probability p the reward becomes 0 or 1 (50/50);
# - **rare discovery** — with probability p a row's answer is replaced by the correct answer,
#   reported with probability 1.
#
# Final error = 1 − E[R] of the friction-free learner (100 prompts × 10 answers), averaged over the
# last three logged steps. Methods: PG, PMPO, DG; on the staleness panel also VCPO (truncated IS,
# min-variance baseline, ESS-scaled step) and GAC (PPO + gradient alignment control). The final
# error is bimodal — a seed stuck on a wrong deterministic answer sits near 0.5 beside seeds that
# solved the task — so comparisons are decided by the exact sign-flip test (paired over seeds: the
# same seed gives every method the same initial network and friction draws).
#
# **Paper fidelity** (the committed figure): H = 10, 8 seeds (one job each), **600 of P2's 10,000
# steps** (P2's budget as a third-party summary reads it; the paper's own friction strengths are not
# in the text available offline), strengths D ∈ {0, 4, 16}, p_bug and p ∈ {0, 0.1, 0.3}, p_disc ∈
# {0, 0.01, 0.03}. At 600 steps the claims are about the first 6% of P2's budget: which method has
# learned the task by then under each friction, not where each ends. The runs at actor bug 0.1,
# reward corruption 0.3, rare discovery 0.03 and D = 16 are reference-match's, which compares them
# with the reference code.
#
# **Quick** (the test suite): H = 2, 4 seeds, 150 steps, one strength per panel (D = 16, p_bug = 0.3,
# p = 0.3, p_disc = 0.05), PG and DG only, exact error. At H = 2 there are four prompts and learning
# is a lottery over which prompt collapses onto a wrong deterministic answer; the per-friction
# comparisons are reported there, and what is asserted is that DG solves H = 2 (final error below
# the 0.2 "solved" threshold) under staleness, reward corruption and rare discovery.

# %%
import numpy as np
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import color, plt, save_figure, use_style
from simulations import claim_rules as rules
from simulations import fidelity_from_env, results
from simulations.reference import all_reference_curves
from simulations.sequences import FIDELITY, PANELS, budget_note, final

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
frame = results("frictions")
book = ClaimBook("frictions")
use_style()
base_methods = list(f["friction_methods"])
paired = "sign-flip" if f["friction_seeds"] >= 6 else "t"  # the exact test needs ≥ 6 seeds to reach 2.5%


def final_errors(panel, method, strength):
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
    methods_here = base_methods + list(f["friction_extra"].get(panel, ()))
    for i, m in enumerate(methods_here):
        sub = table[(table.panel == panel) & (table.method == m)]
        values = [sub[sub.strength == s].error.fillna(1.0).to_numpy() for s in strengths]  # diverged: worst
        med, lo, hi = (np.maximum([np.quantile(v, q) for v in values], 1e-4) for q in (0.5, 0.25, 0.75))
        offset = 0.07 * (i - (len(methods_here) - 1) / 2)
        ax.errorbar(positions + offset, med, yerr=[med - lo, hi - med], fmt="o-", color=color(m), label=m, capsize=2,
                    ms=4)
    ax.set_xticks(positions, [str(s) for s in strengths])
    ax.set(xlabel={"staleness": "delay D", "actor bug": "p_bug", "reward corruption": "p",
                   "rare discovery": "p_disc"}[panel], ylabel="final error", title=panel, yscale="log")
axes[0].legend(fontsize=7)
save_figure(fig, "frictions", note=f"fidelity={fidelity}, H = {f['H']}, "
            f"{budget_note('frictions', f['friction_steps'], frame.replicate.nunique())}",
            bands="points: median over seeds (a diverged seed counts as error 1), bars: interquartile range; "
                  "errors below 1e-4 drawn at 1e-4")

# %% [markdown]
# ## Claims
# "Averaged over the frictions": per seed, the mean final error over the four panels at their
# largest strength. P2's "roughly 10× lower error" as written (`simulations.claim_rules`): per seed
# log(error_baseline / error_DG), errors floored at 10⁻⁴ (the evaluation's resolution; on the log
# scale a ratio of errors is symmetric, which a mean of raw ratios is not), its mean above log √10
# — per friction at its largest strength, and averaged over the frictions.
# GAC's "matches synchronized baselines even at high staleness": GAC at D = 16 against GAC
# synchronous, paired, an exact sign-flip TOST within ±0.1 (the metric is bimodal), evidence only
# if both are informative and the same test against PG at D = 16 fails.

# %%
top = {p: max(s) for p, s in f["strengths"].items()}
per_seed = {m: np.mean([final_errors(p, m, top[p]) for p in f["strengths"]], axis=0) for m in base_methods}
settle = book.report if fidelity == "quick" else (lambda claim: claim)
for m in base_methods:
    if m == "DG":
        continue
    settle(book.less(f"dg-below-{m.lower()}-averaged", f"averaged over the four frictions at their largest "
                     f"strength, DG's final error is lower than {m}'s", per_seed["DG"], per_seed[m], test=paired,
                     worse="high"))


def log_ratio(baseline, dg):
    return np.log(np.maximum(baseline, 1e-4)) - np.log(np.maximum(dg, 1e-4))


for m in base_methods:  # P2's "roughly 10× lower error", per friction and averaged
    if m == "DG":
        continue
    settle(book.above(f"dg-ten-x-{m.lower()}-averaged", f"averaged over the frictions, {m}'s error is roughly 10× DG's "
                      "(mean log ratio above log √10)", log_ratio(per_seed[m], per_seed["DG"]), rules.TEN_X_LOG_THRESHOLD,
                      test=paired, worse="low"))
    for panel in f["strengths"]:
        settle(book.above(f"dg-ten-x-{m.lower()}-{panel.replace(' ', '-')}", f"{panel} at {top[panel]}: {m}'s error "
                          "is roughly 10× DG's (mean log ratio above log √10)",
                          log_ratio(final_errors(panel, m, top[panel]), final_errors(panel, "DG", top[panel])),
                          rules.TEN_X_LOG_THRESHOLD, test=paired, worse="low"))
if "GAC" in f["friction_extra"].get("staleness", ()):  # GAC's "matches synchronized baselines"
    D = top["staleness"]
    settle(book.equivalent("gac-matches-sync-at-high-staleness", f"GAC at D = {D} ends within ±{rules.GAC_BAND['frictions']} "
                           "of GAC synchronous (paired, exact sign-flip TOST)", final_errors("staleness", "GAC", D),
                           final_errors("staleness", "GAC", 0), band=rules.GAC_BAND["frictions"], paired=True,
                           test=paired if paired == "sign-flip" else "t", worse="high",
                           trivial=rules.UNTRAINED_ERROR["frictions"], margin=rules.INFORMATIVE_MARGIN,
                           other=final_errors("staleness", "PG", D), other_label=f"PG at D = {D}"))
rows = []
for panel, strengths in f["strengths"].items():
    for m in base_methods + list(f["friction_extra"].get(panel, ())):
        if m == "DG":
            continue
        for s in strengths[1:]:
            dg, other = final_errors(panel, "DG", s), final_errors(panel, m, s)
            rows.append({"panel": panel, "strength": s, "vs": m, "DG": np.nanmean(dg), m: np.nanmean(other)})
            settle(book.less(f"dg-below-{m.lower()}-{panel.replace(' ', '-')}-{s}",
                             f"{panel} at {s}: DG's final error is lower than {m}'s", dg, other, test=paired,
                             worse="high"))
if fidelity == "quick":
    for panel in f["strengths"]:
        claim = book.below(f"dg-solves-H{f['H']}-{panel.replace(' ', '-')}",
                           f"{panel} at {top[panel]}: DG solves H = {f['H']} (final error below {f['solved']})",
                           final_errors(panel, "DG", top[panel]), f["solved"], worse="high")
        if panel == "actor bug":
            book.report(claim)
print(pd.DataFrame(rows).round(3).to_string(index=False))

# %% [markdown]
# **The reference code on the actor-bug panel.** The paper's claim (DG more robust than PG to an
# actor bug) is measured on the reference code itself at p_bug = 0.1, its friction-free learner
# reward at step 600 (committed reference data, independent seeds: Welch). It is asserted: where the
# paper's own code contradicts the paper's statement, that is a FAIL with its cause, not a footnote.

# %%
if fidelity != "quick":
    ref = all_reference_curves()
    ref = ref[(ref.config == "actor-bug") & (ref.step == 600)]
    if not ref.empty:
        err = {m: 1 - ref[ref.method == m].sort_values("seed").clean_learner_reward.to_numpy() for m in ("DG", "PG")}
        book.less("reference-dg-below-pg-actor-bug-0.1", "the reference code (egg), actor bug 0.1: DG's "
                  "error at step 600 is lower than PG's", err["DG"], err["PG"], paired=False, worse="high")
print({p: PANELS[p] for p in PANELS})
print(book.table())
book.check()
