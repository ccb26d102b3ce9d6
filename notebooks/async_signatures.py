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
# Note: a tabular bandit has no interference between contexts, so staleness reshapes the learning
# curve (slower at first; the stale learner keeps pushing towards arms it has already learnt, and
# ends lower) but does not destabilise it. Here the controllers act on the signatures, and the
# error panel shows their cost; the MNIST and sequence figures test them where staleness does harm.

# %%


from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, plt, save_figure, use_style
from simulations import fidelity_from_env, results

fidelity = fidelity_from_env()
runs = results("async-signatures")
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
axes[0].set(xscale="log", xlabel="step", ylabel="cos(g_t, g_{t−1})", title="GAC's signature")
axes[1].set(xscale="log", xlabel="step", ylabel="ESS / B", title="VCPO's signal")
axes[2].set(xscale="log", xlabel="step", ylabel="cos of applied updates", title=f"controllers at D = {D_max}")
axes[3].set(xscale="log", yscale="log", xlabel="step", ylabel="error", title="error")
axes[0].legend(fontsize=7)
axes[2].legend(fontsize=7)
save_figure(fig, "async-signatures", note=f"fidelity={fidelity}, {runs.member.nunique()} seeds")

# %% [markdown]
# ## Claims (per-seed averages over steps 100–300: after the first progress, while the stale
# learners are still learning; by step 500 every run has converged and the signatures vanish)

# %%
late = runs[(runs.step >= 100) & (runs.step <= 300)]
per_seed = late.groupby(["label", "member"])[["cos_consecutive", "cos_consecutive_update", "ess_frac", "lr_scale"]].mean()


def seeds(label, column):
    return per_seed.loc[label][column].sort_index().to_numpy()


sync, stale = "D=0 none", f"D={D_max} none"
book.below("sync-cos-near-zero", "synchronous: the late consecutive-gradient cosine is near 0 (< 0.1)", seeds(sync, "cos_consecutive"), 0.1)
book.greater("stale-cos-high", f"D = {D_max}: the consecutive-gradient cosine is higher than in sync (paired)",
             seeds(stale, "cos_consecutive"), seeds(sync, "cos_consecutive"))
book.close("sync-ess-is-one", "synchronous: ESS/B = 1 exactly (on-policy ratios)", seeds(sync, "ess_frac"), 1.0, tol=1e-12)
book.less("stale-ess-drops", f"D = {D_max}: ESS/B falls below sync (paired)", seeds(stale, "ess_frac"), seeds(sync, "ess_frac"))
gac = f"D={D_max} GAC"
book.less("gac-restores-update-cosine", f"D = {D_max} with GAC: consecutive applied updates are less aligned than without it (paired)",
          seeds(gac, "cos_consecutive_update"), seeds(stale, "cos_consecutive_update"))
book.below("gac-update-cosine-sync-level", "with GAC the applied-update cosine returns below the sync level + 0.02",
           seeds(gac, "cos_consecutive_update") - seeds(sync, "cos_consecutive_update"), 0.02)
ess = f"D={D_max} ESS step"
book.below("ess-step-shrinks", f"D = {D_max} with the ESS-scaled step: the mean step scale sqrt(ESS/B) is below 1",
           seeds(ess, "lr_scale"), 1.0)
print(book.table())
book.check()
