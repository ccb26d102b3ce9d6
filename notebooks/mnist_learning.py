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
# # MNIST — learning curves of PG, DG and the supervised oracle
#
# A contextual bandit on real digits: each step draws B = 100 images per seed, the policy (an MLP
# 784 → 100 → 10, Adam 1e-3) samples one digit per image, R = 1[a = y]; the label reaches the
# learner only through R. PG is REINFORCE and DG the Delightful Policy Gradient (η = 1), both with
# the label-free baseline b(x) = Σ_a π(a|x)²; CE is cross-entropy on the true label, the supervised
# oracle (it sees the label). Greedy test error on held-out images vs step; the seeds of a method run
# as one batched population and share their initial weights with the other methods (paired seeds).
#
# Claims (shared/spec/figures.md, "mnist-learning"): DG learns faster than PG and closes a large
# part of the gap to CE.

# %%
import numpy as np
from scipy import stats

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import band, plt, use_style
from sandbox.analysis.stats import Interval
from simulations import fidelity_from_env, results
from simulations.mnist import data_note, save

fidelity = fidelity_from_env()
runs = results("mnist-learning")
book = ClaimBook("mnist-learning")
use_style()
METHODS = ("PG", "DG", "CE")


def gap_closed(pg, dg, ce, axis=-1):
    """Fraction of PG's gap to CE that DG closes: (mean PG − mean DG)/(mean PG − mean CE)."""
    return (pg.mean(axis) - dg.mean(axis)) / (pg.mean(axis) - ce.mean(axis))



def curves(label, column="error"):
    sub = runs[runs.label == label].pivot(index="member", columns="step", values=column)
    return sub.columns.to_numpy(), sub.to_numpy()


# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.3))
for label in METHODS:
    steps, err = curves(label)
    band(axes[0], steps, err, label)
    band(axes[1], steps[1:], err[:, 1:], label)
axes[0].set(xlabel="step", ylabel="greedy test error", title="test error")
axes[1].set(xlabel="step (log)", ylabel="greedy test error (log)", xscale="log", yscale="log", title="same, log–log")
axes[0].legend()
save(fig, "mnist-learning", note=data_note(runs, fidelity))

# %% [markdown]
# ## Claims
#
# "Learns faster": the mean error over the logged steps from step 10 on (an area under the learning
# curve on the log-step axis), and the error at the last step, each paired over seeds.
#
# "Closes a large part of the gap": the fraction (mean err_PG − mean err_DG)/(mean err_PG − mean
# err_CE) at the last step, with a paired bootstrap over seeds. Its point estimate is about 0.8 at
# quick fidelity (0.81, 0.82 and 0.80 for three different base seeds), but PG's error is
# heavy-tailed over seeds — some seeds sit on a plateau with a digit class not yet learned, which
# DG avoids — so with 5 seeds the interval's lower end ranged from 0.34 to 0.71. "More than half"
# is therefore what the estimate says, not what 5 seeds certify; the asserted threshold is that the
# 95% interval lies above one quarter. (For a typical, non-plateaued seed DG closes about a third to
# a half of the gap at step 400; the fraction grows over the second half of training.)
# %%
final = int(runs.step.max())
err = {k: runs[(runs.label == k) & (runs.step == final)].sort_values("member").error.to_numpy() for k in METHODS}
late = runs[runs.step >= 10].groupby(["label", "member"]).error.mean().unstack(0)
book.less("dg-faster-auc", "DG's mean error over logged steps ≥ 10 is lower than PG's (paired over seeds)",
          late["DG"].to_numpy(), late["PG"].to_numpy())
book.less("dg-below-pg-final", f"DG's error at step {final} is lower than PG's (paired over seeds)", err["DG"], err["PG"])
gap = stats.bootstrap((err["PG"], err["DG"], err["CE"]), gap_closed, paired=True, vectorized=True, n_resamples=2000,
                      confidence_level=0.95, method="percentile", random_state=np.random.default_rng(0))
iv = Interval(float(gap_closed(err["PG"], err["DG"], err["CE"])), *map(float, gap.confidence_interval))
book.holds("dg-closes-gap", f"DG closes a large part of PG's gap to CE at step {final}: "
           "(mean PG − mean DG)/(mean PG − mean CE), 95% CI above 1/4", iv, iv.low > 0.25,
           "paired bootstrap over seeds, percentile CI")
book.less("ce-below-pg-final", f"the supervised oracle CE stays below PG at step {final} (paired)", err["CE"], err["PG"])
print({k: np.round(v, 4).tolist() for k, v in err.items()})
print(book.table())
book.check()
