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
# # Prop. 2 — exact gradients on the multi-context bandit
#
# N = 100 contexts × K = 10 arms, logits ~ N(0, 1), baseline b = 0, the *exact* expected update of
# each estimator (every action enumerated), normalised step α = 0.1 (the papers' step size, as in
# Prop. 1). With b = 0 only the correct arm carries advantage, so context n's update is weighted
# by p for PG, by 1 for the CE oracle and by p/(1 + p^{1/η}) for DG — between the two. The weight formula is checked against the library's
# DG to machine precision; the alignment with the CE oracle is compared at the *same parameters*
# at every logged step of every trajectory.

# %%
import numpy as np

from sandbox.analysis.claims import Choice, ClaimBook
from sandbox.analysis.plotting import band, color, plt, save_figure, use_style
from simulations import fidelity_from_env, results
from simulations.bandit_theory import PROP2_WINDOW

fidelity = fidelity_from_env()
frame = results("prop2-multi-context")
book = ClaimBook("prop2-multi-context")
use_style()
every = frame[frame.label.isin(["PG", "DG", "CE"])]
runs = every[every.seed_set == "original"]
weights = frame[frame.label == "weights"].dropna(axis=1, how="all")


def curves(label, column, source=None):
    source = runs if source is None else source
    sub = source[source.label == label].pivot(index="member", columns="step", values=column)
    return sub.columns.to_numpy(), sub.to_numpy()


# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
for label in ("PG", "DG", "CE"):
    steps, err = curves(label, "error")
    band(axes[0], steps, err, label, color_=color(label.lower()))
    steps, cos = curves(label, "cos_ce")
    keep = steps > 0
    band(axes[1], steps[keep], np.maximum(1 - cos[:, keep], 1e-12), label, color_=color(label.lower()))
axes[0].set(xlabel="step", ylabel="average error 1 − mean π(y)", title="error (exact gradients)")
axes[1].set(xlabel="step", ylabel="1 − cos(g, CE oracle)", yscale="log", title="misalignment to the CE oracle (CE ≡ 0, floored)")
axes[0].legend()
p = np.linspace(1e-3, 1, 200)
for eta, style in ((0.5, ":"), (1.0, "-"), (2.0, "--")):
    axes[2].plot(p, p / (1 + p ** (1 / eta)), style, color=color("dg"), label=f"DG η={eta}")
axes[2].plot(p, p, color=color("pg"), label="PG: p")
axes[2].plot(p, np.ones_like(p), color=color("ce"), label="CE: 1")
axes[2].set(xlabel="p = π(y|x)", ylabel="per-context weight", title="weight of a context's update", yscale="log")
axes[2].legend(fontsize=7)
axes[0].axvspan(0.6 * runs.step.max(), runs.step.max(), color="0.5", alpha=0.12, linewidth=0, label="asserted window")
axes[0].legend()
save_figure(fig, "prop2-multi-context", note=f"fidelity={fidelity}, {runs.member.nunique()} seeds, {int(runs.step.max()):,} steps (the spec's bandit settings; the paper's budget is not stated)")

# %% [markdown]
# ## Claims
#
# PG is steepest ascent on J itself, so it leads at first: DG passes PG after a few dozen steps
# and CE passes DG after about 250 (at α = 0.1). The ordering CE < DG < PG is therefore asserted at
# *every* logged step of a late window — the last 40% of the budget — with a paired t-interval per
# step; the step from which the mean ordering holds to the end (the crossing) is reported beside it.
# That window was fixed (ec1ec0c) after the crossing had been seen on these runs, so on them the
# ordering is reported, and it is asserted on the same runs one base seed on (the population of seed 1000),
# never used to choose it (paper and full fidelity). The weight formula is an identity of DG's
# definition, and the same-parameter alignment a consequence of Prop. 2 computed exactly: sanity.

# %%
book.close("dg-weight-formula", "DG's exact per-context update equals (1/N)·p/(1 + p^{1/η})·(e_y − π) for η ∈ {½, 1, 2} (rel. 1e-12)",
           weights.max_rel_error.to_numpy(), 0.0, tol=1e-12)
logged = runs[runs.step > 0]
gap = (logged.ref_dg_cos_ce - logged.ref_reinforce_cos_ce).to_numpy()
book.exact("dg-closer-to-ce-every-step",
           "at every logged step of every trajectory, cos(g_DG, CE) > cos(g_PG, CE) at the same parameters (η = 1; value: the smallest gap)",
           gap.min(), bool(gap.min() > 0))
final = int(runs.step.max())
start = int(0.6 * final)
choice = Choice(*PROP2_WINDOW)


def ordering(source, suffix="", seeds=""):
    """The two window claims on ``source``'s runs; ``seeds`` names them in the statement."""
    steps, err = {}, {}
    for k in ("PG", "DG", "CE"):
        steps[k], err[k] = curves(k, "error", source)
    window = steps["PG"] >= start
    on = f" ({seeds})" if seeds else ""
    return steps, err, [
        book.less_throughout(f"ce-below-dg-window{suffix}", f"CE's error is below DG's at every logged step {start}–{final}"
                             f"{on} (paired over seeds)", err["CE"][:, window], err["DG"][:, window],
                             steps["PG"][window], worse="high"),
        book.less_throughout(f"dg-below-pg-window{suffix}", f"DG's error is below PG's at every logged step {start}–{final}"
                             f"{on} (paired over seeds)", err["DG"][:, window], err["PG"][:, window],
                             steps["PG"][window], worse="high")]


steps, err, seen = ordering(runs)
confirmation = every[every.seed_set == "confirmation"]
if len(confirmation):
    for claim in seen:
        book.selection(claim, choice)
    seeds = f"base seed 1: {confirmation.member.nunique()} seeds of the population drawn from seed {int(confirmation.seed.min())}"
    for claim in ordering(confirmation, "-confirmed", seeds)[2]:
        book.confirmed(claim, choice, seeds)
mean = {k: np.nanmean(v, axis=0) for k, v in err.items()}
ordered = (mean["CE"] < mean["DG"]) & (mean["DG"] < mean["PG"])
crossing = next((int(s) for j, s in enumerate(steps["PG"]) if ordered[j:].all()), None)
book.report(book.exact("ordering-crossing-step", "the mean errors are ordered CE < DG < PG from this logged step to the end",
                       np.nan if crossing is None else crossing, crossing is not None and crossing <= start,
                       "first logged step from which the ordering of the means holds at every later one"))
print(book.table())
book.check()
