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
# # MNIST — misalignment to the PG oracle and to the CE oracle
#
# The runs of the learning figure (PG, DG, CE on MNIST; B = 100 images, one sample each, Σπ²
# baseline). At every logged step, the batch gradient ĝ of the update is compared with two oracles
# computed on the same images: the exact policy gradient Σ_a π(a|x)·R(x, a)·∇log π(a|x)
# (enumerating the 10 digits) and the cross-entropy direction ∇log π(y|x). Misalignment = 1 − cos.
#
# Two views: (a, b) each estimator along its own trajectory; (c) at the same parameters — every run
# also computes PG's and DG's batch gradients on its own batch (the same images, samples and
# weights), so the comparison is not confounded by where each method has got to.
#
# Claim (shared/spec/figures.md, "mnist-alignment"): DG is closer to the CE oracle than PG.

# %%
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, color, plt, use_style
from sandbox.analysis.stability import seed_mean
from simulations import fidelity_from_env, results
from simulations.mnist import data_note, save

fidelity = fidelity_from_env()
runs = results("mnist-alignment")
book = ClaimBook("mnist-alignment")
use_style()
logged = runs[runs.step > 0].copy()
for column in [c for c in logged.columns if c.startswith(("cos_pg", "cos_ce", "probe_"))]:
    logged["mis" + column.removeprefix("probe").removeprefix("cos")] = 1 - logged[column]


def curves(frame, column):
    sub = frame.pivot(index="member", columns="step", values=column)
    return sub.columns.to_numpy(), sub.to_numpy()


# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for label in ("PG", "DG", "CE"):
    steps, mis = curves(logged[logged.label == label], "mis_pg")
    band(axes[0], steps, mis, label)
    if label != "CE":
        steps, mis = curves(logged[logged.label == label], "mis_ce")
        band(axes[1], steps, mis, label)
same = pd.DataFrame({c: seed_mean(logged, c, ["member", "step"])  # a diverged trajectory stays NaN
                     for c in ("mis_reinforce_cos_ce", "mis_dg_cos_ce")}).reset_index()
for column, label in (("mis_reinforce_cos_ce", "PG"), ("mis_dg_cos_ce", "DG")):
    steps, mis = curves(same, column)
    band(axes[2], steps, mis, label, color_=color(label))
axes[0].set(xlabel="step", ylabel="1 − cos(ĝ, exact PG)", xscale="log", title="(a) to the PG oracle, own trajectory")
axes[1].set(xlabel="step", ylabel="1 − cos(ĝ, CE oracle)", xscale="log", title="(b) to the CE oracle, own trajectory")
axes[2].set(xlabel="step", ylabel="1 − cos(ĝ, CE oracle)", xscale="log",
            title="(c) to the CE oracle, same parameters\n(mean over the PG, DG and CE trajectories)")
for ax in axes:
    ax.legend()
save(fig, "mnist-alignment", note=data_note(runs, fidelity))

# %% [markdown]
# ## Claims
#
# Per seed, the mean misalignment over the logged steps; compared paired over seeds. At the same
# parameters the average runs over the three trajectories (PG's, DG's and CE's).

# %%
own = seed_mean(logged[logged.label.isin(["PG", "DG"])], "mis_ce", ["label", "member"]).unstack(0)
book.less("dg-closer-to-ce-own", "along its own trajectory, DG's mean 1 − cos(ĝ, CE oracle) is below PG's (paired over seeds)",
          own["DG"].to_numpy(), own["PG"].to_numpy(), worse="high")
probe = pd.DataFrame({c: seed_mean(same, c, ["member"]) for c in ("mis_reinforce_cos_ce", "mis_dg_cos_ce")})
book.less("dg-closer-to-ce-same-params",
          "at the same parameters and batch, DG's mean 1 − cos(ĝ, CE oracle) is below PG's (paired over seeds)",
          probe["mis_dg_cos_ce"].to_numpy(), probe["mis_reinforce_cos_ce"].to_numpy(), worse="high")
print(own.round(4), probe.round(4), sep="\n")
print(book.table())
book.check()
