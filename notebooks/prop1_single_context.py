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
# # Prop. 1 — the symmetric single-context bandit
#
# K = 100 arms, one correct, B = 100 samples per step, baseline b = ½, normalised step α = 0.1
# (z ← z + α·ĝ/‖ĝ‖), logits start at 0. Error 1 − π(y*) and misalignment 1 − cos(ĝ, ∇J) vs step.
#
# In the symmetric bandit every wrong arm has the same probability, so DG's gate is the same w₋ for
# every failure and the success direction e_y − π is parallel to ∇J: DG's expected gradient is
# parallel to PG's, and DG's perpendicular (noise) second moment is exactly w₋² times PG's,
# w₋ = σ(χ₋/η), χ₋ = −b·log((K − 1)/(1 − p)). Both are checked against the simulator below.

# %%
import numpy as np
from scipy import stats

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, plt, save_figure, use_style
from sandbox.analysis.stability import seed_mean
from sandbox.analysis.stats import Interval
from simulations import fidelity_from_env, results

fidelity = fidelity_from_env()
frame = results("prop1-single-context")
book = ClaimBook("prop1-single-context")
use_style()
runs = frame[frame["label"].isin(["PG", "DG"])].copy()
closed = frame[frame["label"] == "closed form"].dropna(axis=1, how="all")


def curves(label, column):
    sub = runs[runs.label == label].pivot(index="member", columns="step", values=column)
    return sub.columns.to_numpy(), sub.to_numpy()


# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
for label in ("PG", "DG"):
    steps, err = curves(label, "error")
    band(axes[0], steps, err, label)
    steps, cos = curves(label, "cos_pg")
    keep = steps > 0
    # once a seed has converged (error < 1e-9) its gradient is ~1e-16 and its direction is rounding noise
    band(axes[1], steps[keep], np.where(err[:, keep] > 1e-9, 1 - cos[:, keep], np.nan), label)
axes[0].set(xlabel="step", ylabel="error 1 − π(y*)", title="error")
axes[1].set(xlabel="step", ylabel="1 − cos(ĝ, ∇J)", title="misalignment (finite batch, until converged)")
axes[0].legend()
p = closed["p"].to_numpy()
mc_ratio = [np.mean(d) / np.mean(g) for d, g in zip(closed["mc_perp_dg"], closed["mc_perp_pg"])]
axes[2].plot(p, closed["w_minus_sq"], "k-", label="closed form w₋²")
axes[2].plot(p, closed["ratio_exact"], "o", mfc="none", color="C3", label="enumeration")
axes[2].plot(p, mc_ratio, "x", color="C0", label="simulator (Monte Carlo)")
axes[2].set(xlabel="p = π(y*)", ylabel="E‖g⊥‖²: DG / PG", title="perpendicular variance ratio")
axes[2].legend()
save_figure(fig, "prop1-single-context", note=f"fidelity={fidelity}, {runs.member.nunique()} seeds, {int(runs.step.max()):,} steps (the spec's bandit settings; the paper's budget is not stated)")

# %% [markdown]
# ## Claims
#
# The closed forms (parallel expected gradients, the w₋² ratio by enumeration and in the simulator)
# are identities of the symmetric bandit: sanity checks of the implementation. DG's lower
# misalignment and error along the trajectory are Prop. 1's consequences (a parallel expected
# gradient with w₋² times PG's perpendicular variance), re-measured by Monte Carlo at dozens of
# standard errors: they cannot come out otherwise unless the code is wrong, so they are sanity
# checks too, never evidence (paired over seeds, t-intervals).

# %%
book.close("parallel", "DG's expected gradient is parallel to PG's in the symmetric bandit (1 − cos ≤ 1e-6)",
           1 - closed["cos_parallel"].to_numpy(), 0.0, tol=1e-6)
book.close("perp-ratio-enumerated", "DG's perpendicular second moment equals w₋² × PG's (enumeration, rel. 1e-9)",
           closed["ratio_exact"].to_numpy() / closed["w_minus_sq"].to_numpy(), 1.0, tol=1e-9)
level = 1 - 0.01 / len(closed)  # 99% for all p at once (Bonferroni): one family of simulator checks
for _, row in closed.iterrows():
    res = stats.bootstrap((np.asarray(row.mc_perp_dg), np.asarray(row.mc_perp_pg)),
                          lambda d, g, axis=-1: d.mean(axis) / g.mean(axis), paired=False, vectorized=True,
                          confidence_level=level, n_resamples=2000, random_state=np.random.default_rng(0))
    lo, hi = res.confidence_interval
    book.holds(f"perp-ratio-simulator-p={row.p:g}", f"simulator's E‖ĝ⊥‖² ratio DG/PG contains w₋² = {row.w_minus_sq:.4g} (99% family-wise CI)",
               Interval(np.mean(row.mc_perp_dg) / np.mean(row.mc_perp_pg), lo, hi, level), lo <= row.w_minus_sq <= hi,
               f"independent batches, bootstrap of the ratio of means at {level:.2%} (Bonferroni over {len(closed)} p)", kind="sanity")

mid = int(min(runs.step.unique(), key=lambda s: abs(s - runs.step.max() / 2)))
pg_mid = runs[(runs.label == "PG") & (runs.step == mid)].sort_values("member").error.to_numpy()
dg_mid = runs[(runs.label == "DG") & (runs.step == mid)].sort_values("member").error.to_numpy()
book.less("dg-lower-error", f"DG's error is lower than PG's at step {mid} (paired over seeds; Prop. 1's consequence)",
          dg_mid, pg_mid, worse="high", kind="sanity")
learning = runs[(runs.step > 0) & (runs.step <= mid)]
mis = seed_mean(learning.assign(mis=1 - learning.cos_pg), "mis", ["label", "member"]).unstack(0)
book.less("dg-lower-misalignment", f"DG's mean misalignment 1 − cos(ĝ, ∇J) over steps 1…{mid} is lower than PG's "
          "(Prop. 1 measured by Monte Carlo)", mis["DG"].to_numpy(), mis["PG"].to_numpy(), worse="high", kind="sanity")
print(book.table())
book.check()
