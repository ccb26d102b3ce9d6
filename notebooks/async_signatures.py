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
# # Signatures of staleness: consecutive-gradient cosine and ESS/B
#
# The same REINFORCE learner (20 contexts × 10 arms, 8 samples per context, Adam 0.1) run
# synchronously and with its actor D steps behind (D = 16, 64; 1 and 4 at full fidelity).
# GAC's signature is the cosine between consecutive gradients; VCPO's is ESS/B of the sequence
# ratios π_θ/μ. We also run GAC's projection (c_proj = 0.1, never skipping — a modelling choice for
# this small problem, whose stale cosines stay below GAC's default 0.3) and VCPO's ESS-scaled step.
#
# Does staleness hurt here, and do the controllers undo the harm? The spec says GAC's projection
# and VCPO's ESS-scaled step "restore sync-like behaviour". In this bandit staleness does hurt —
# the stale learner's mean error over the run is higher (it learns later) — but the harm is pure
# lag: with a tabular policy and a group baseline, every stale expected gradient still points the
# right way coordinate by coordinate (for context x: μ(y)(1 − μ(y)) > 0 on the correct logit), so
# there is no overshoot for a controller to damp, and shrinking the step only delays learning more.
# We looked for a regime where it is otherwise (Adam 0.1 and 0.3, SGD 10 and 100, the normalised
# step, 100 contexts, TIS instead of REINFORCE; 8 seeds, 300 steps, D = 64): staleness raised the
# mean error in every one, and both controllers raised it further in every one. The restoration
# claim — GAC's "matches synchronized baselines even at high staleness" — is still *asserted* below,
# as the papers state it: it FAILs here, with that cause. That the controllers move their own
# signals (GAC lowers the very cosine it projects out; √(ESS/B) < 1), and that ESS/B falls below its
# synchronous value (exactly 1 on-policy, ≤ 1 always by Cauchy–Schwarz), are true by construction:
# sanity checks, not evidence — VCPO's claim that ESS *predicts* collapse is another matter, not
# tested here.
#
# The window of the cosine claims, steps 100–300, was fixed (808521c) after these runs had been
# seen: over steps 2–99 the synchronous cosine is higher, and the panels shade the window. On these
# seeds the window claims are reported; they are asserted on the same runs one base seed on (the
# population of seed 1000), never used to choose it (paper and full fidelity).

# %%
import pandas as pd

from sandbox.analysis.claims import Choice, ClaimBook
from sandbox.analysis.plotting import band, plt, save_figure, use_style
from sandbox.analysis.stability import seed_mean
from simulations import fidelity_from_env, results
from simulations.bandit_theory import ASYNC_WINDOW

fidelity = fidelity_from_env()
every = results("async-signatures")
runs = every[every.seed_set == "original"]
book = ClaimBook("async-signatures")
use_style()
delays = sorted({int(label.split()[0][2:]) for label in runs.label.unique()})
D_max = max(delays)
palette = {d: plt.cm.viridis(i / max(len(delays) - 1, 1)) for i, d in enumerate(delays)}


def curves(label, column):
    sub = runs[(runs.label == label) & (runs.step > 1)].pivot(index="member", columns="step", values=column)
    return sub.columns.to_numpy(), sub.to_numpy()


# %%
fig, axes = plt.subplots(1, 4, figsize=(14, 3.3))
for d in delays:
    label = f"D={d} none"
    for ax, column in zip(axes[:2], ("cos_consecutive", "ess_frac")):
        steps, values = curves(label, column)
        band(ax, steps, values, f"D = {d}", color_=palette[d])
for label, style in ((f"D={D_max} none", "-"), (f"D={D_max} GAC", "--"), (f"D={D_max} ESS step", ":"), ("D=0 none", "-")):
    steps, values = curves(label, "cos_consecutive_update")
    c = palette[0] if label.startswith("D=0") else palette[D_max]
    band(axes[2], steps, values, label.replace(" none", ""), color_=c, linestyle=style)
    steps, err = curves(label, "error")
    band(axes[3], steps, err, label.replace(" none", ""), color_=c, linestyle=style)
for ax in axes[:2]:
    ax.axvspan(100, 300, color="0.5", alpha=0.12, linewidth=0, label="window of the claims")
axes[0].set(xscale="log", xlabel="step", ylabel="cos(g_t, g_{t−1})", title="GAC's signature")
axes[1].set(xscale="log", xlabel="step", ylabel="ESS / B", title="VCPO's signal")
axes[2].set(xscale="log", xlabel="step", ylabel="cos of applied updates", title=f"controllers at D = {D_max}")
axes[3].set(xscale="log", yscale="log", xlabel="step", ylabel="error", title="error")
for ax in axes:  # every panel names its curves
    ax.legend(fontsize=7)
save_figure(fig, "async-signatures", note=f"fidelity={fidelity}, {runs.member.nunique()} seeds, {int(runs.step.max()):,} steps (the spec's bandit settings; the paper's budget is not stated)")

# %% [markdown]
# ## Claims (per-seed averages over steps 100–300: after the first progress, while the stale
# learners are still learning; by step 500 every run has converged and the signatures vanish.
# The harm and the controllers' effect on it: per-seed mean error over logged steps ≥ 20.)

# %%
def window_means(source):
    late = source[(source.step >= 100) & (source.step <= 300)]
    return pd.DataFrame({c: seed_mean(late, c, ["label", "member"])  # a diverged seed stays NaN
                         for c in ("cos_consecutive", "cos_consecutive_update", "ess_frac", "lr_scale")})


per_seed = window_means(runs)
learning = seed_mean(runs[runs.step >= 20], "error", ["label", "member"])


def seeds(label, column, table=None):
    return (per_seed if table is None else table).loc[label][column].sort_index().to_numpy()


def mean_error(label):
    return learning.loc[label].sort_index().to_numpy()


sync, stale = "D=0 none", f"D={D_max} none"
choice = Choice(*ASYNC_WINDOW)


def cosine_claims(table, suffix="", on=""):
    return [book.below(f"sync-cos-near-zero{suffix}", f"synchronous: the consecutive-gradient cosine over steps 100–300 is "
                       f"near 0 (< 0.1){on}", seeds(sync, "cos_consecutive", table), 0.1),
            book.greater(f"stale-cos-high{suffix}", f"D = {D_max}: the consecutive-gradient cosine over steps 100–300 is "
                         f"higher than in sync{on} (paired)", seeds(stale, "cos_consecutive", table),
                         seeds(sync, "cos_consecutive", table))]


seen = cosine_claims(per_seed)
confirmation = every[every.seed_set == "confirmation"]
if len(confirmation):
    for claim in seen:
        book.selection(claim, choice)
    on = f"base seed 1: {confirmation.member.nunique()} seeds of the population drawn from seed {int(confirmation.seed.min())}"
    for claim in cosine_claims(window_means(confirmation), "-confirmed", f" ({on})"):
        book.confirmed(claim, choice, on)
book.close("sync-ess-is-one", "synchronous: ESS/B = 1 exactly (on-policy ratios)", seeds(sync, "ess_frac"), 1.0, tol=1e-12)
book.less("stale-ess-drops", f"D = {D_max}: ESS/B falls below sync (paired; sync is exactly 1 and ESS/B ≤ 1 by "
          "Cauchy–Schwarz, so this holds by construction)", seeds(stale, "ess_frac"), seeds(sync, "ess_frac"), kind="sanity")
book.greater("staleness-hurts", f"D = {D_max}: the mean error over steps ≥ 20 is higher than in sync (paired)",
             mean_error(stale), mean_error(sync), worse="high")
gac, ess = f"D={D_max} GAC", f"D={D_max} ESS step"
settle = book.report if fidelity == "quick" else (lambda claim: claim)  # quick: a rehearsal, too few seeds
for label, method, key in ((gac, "GAC", "gac"), (ess, "the ESS-scaled step", "ess-step")):
    settle(book.less(f"{key}-restores-learning",
                     f"D = {D_max} with {method}: the mean error over steps ≥ 20 is lower than without it (paired)",
                     mean_error(label), mean_error(stale), worse="high"))
book.less("gac-restores-update-cosine", f"D = {D_max} with GAC: consecutive applied updates are less aligned than without it (paired)",
          seeds(gac, "cos_consecutive_update"), seeds(stale, "cos_consecutive_update"), kind="sanity")
book.below("gac-update-cosine-sync-level", "with GAC the applied-update cosine returns below the sync level + 0.02",
           seeds(gac, "cos_consecutive_update") - seeds(sync, "cos_consecutive_update"), 0.02, kind="sanity")
book.below("ess-step-shrinks", f"D = {D_max} with the ESS-scaled step: the mean step scale sqrt(ESS/B) is below 1",
           seeds(ess, "lr_scale"), 1.0, kind="sanity")
print(book.table())
book.check()
