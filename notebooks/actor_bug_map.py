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
# # Actor-bug map: where DG's advantage over PG holds under a landmine, and where it does not
#
# The landmine actor bug as the reference code has it (google-deepmind/egg): with probability
# p_bug the actor's answer is replaced by the constant all-zeros answer, reported with probability
# 1, and the environment adds a penalty N(m, 0.1²) to *every* answer equal to the landmine (sampled
# or injected; m = 0 means no penalty). Token reversal H = 10, V = 2 at the reference-match setting
# (reward = fraction of positions correct, Adam 3e-4, 10 × 10 per step, 600 steps). Cells:
# p_bug ∈ {0.03, 0.1, 0.3} × m ∈ {0, −0.5, −1}, DG and PG, paired over seeds (the same seed gives
# both the same initial network and the same injections).
#
# Why a map: on the reference's own configuration (p_bug = 0.1, no penalty) the reference code's DG
# ends *below* PG in learner reward (reference-match) — the paper's claim that DG is more robust to
# actor bugs fails there for the reference code too. Without a penalty the landmine answer earns
# the partial credit of its zeros, so a learner that follows the injected answers loses little
# reward and gets no signal against it; a penalty makes the landmine a real failure, which DG's gate
# (it suppresses rare failures *of the learner's own* — the injected answer is rare under π) and
# PG's ratio treat differently.
#
# **What is asserted.** Per cell, the final error of each method (mean of the last three logged
# evaluations) and DG − PG with the exact sign-flip interval (a stuck seed makes the final error
# bimodal, so no t-interval). Every cell tests the paper's own statement, made before any of these
# data — DG is more robust than PG to actor bugs — so every cell is asserted as "DG's final error is
# below PG's" (paper and full fidelity), and a cell where the data contradict it is a FAIL, counted.
# Not asserted: a collapsed cell (see below), and a cell without a penalty at p_bug = 0.1 or 0.3,
# which is the very run of the frictions figure (and of reference-match's actor-bug panel): one
# job, one measurement, asserted there and reported here. At quick fidelity every cell is reported.
#
# The landmine is the constant all-zeros answer, as in the reference: for the one prompt in 2^H whose
# reversal is all zeros it is the right answer, and a penalty then punishes a correct answer. At
# H = 10 that is 1 prompt in 1,024; at the quick rehearsal's H = 2 it is 1 in 4, which is most of
# what the quick map's penalty cells show.
#
# **Where both collapse.** A cell where DG and PG end at the *same* final error at every seed is
# not a comparison: the two learners answer the evaluation prompts identically (at paper fidelity,
# penalty −1 at p_bug = 0.1 and 0.3, error ≈ 0.5 at every seed). Such a cell is reported as
# "collapsed", with the per-seed error, not as a difference of zero; why both end there (the
# penalty on the all-zeros answer is one candidate) is not tested here.
#
# **Fidelity.** Quick: H = 2, p_bug ∈ {0.1, 0.3} × m ∈ {0, −1}, 4 seeds (one batched job per
# cell), 150 steps. Paper: as above, 8 seeds (one job each).

# %%
import numpy as np
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import plt, save_figure, use_style
from sandbox.analysis.stats import Interval
from simulations import fidelity_from_env, results
from simulations.sequences import FIDELITY, budget_note, final

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
frame = results("actor-bug-map")
book = ClaimBook("actor-bug-map")
use_style()
P, M = list(f["map_p_bug"]), list(f["map_penalty"])


def cell(method, p, m):
    return final(frame[(frame.method == method) & (frame.p_bug == p) & (frame.penalty == m)], last=3).to_numpy()


# %% [markdown]
# ## Claims (one per cell)

# %%
settle = book.report if fidelity == "quick" else (lambda claim: claim)
shared = set(FIDELITY[fidelity]["strengths"]["actor bug"][1:])  # p_bug of the frictions figure's own runs
collapsed = {}  # (penalty, per-seed errors) → the p_bug values whose DG and PG runs all end there: one measurement
for p in P:
    for m in M:
        dg = cell("DG", p, m)
        if np.array_equal(dg, cell("PG", p, m)):
            collapsed.setdefault((m, dg.tobytes()), []).append(p)
rows = []
for p in P:
    for m in M:
        dg, pg = cell("DG", p, m), cell("PG", p, m)
        if np.array_equal(dg, pg):  # both collapsed to the same answers: reported (once), not compared
            same = collapsed[(m, dg.tobytes())]
            if p == same[0]:
                error = Interval(float(np.mean(dg)), float(np.min(dg)), float(np.max(dg)), n=dg.size,
                                 method="per-seed range")
                at = ", ".join(f"{q:g}" for q in same)
                book.report(book.holds(f"collapsed-p{'-'.join(f'{q:g}' for q in same)}-m{m:g}",
                                       f"p_bug = {at}, penalty {m:g}: DG and PG end at the same final error at every "
                                       f"seed{', the same at each of these p_bug' if len(same) > 1 else ''} (value: "
                                       "its mean [min, max])", error, False,
                                       "identical per-seed final errors: no difference to test"))
            verdict, diff = "collapsed (identical)", (0.0, 0.0, 0.0)
        else:
            claim = book.less(f"dg-below-pg-p{p:g}-m{m:g}", f"p_bug = {p:g}, penalty {m:g}: DG's final "
                              "error is below PG's (paired)", dg, pg, test="sign-flip", worse="high")
            claim = book.report(claim, "the frictions figure's measurement, asserted there") if m == 0 and p in shared \
                else settle(claim)
            verdict = "DG lower" if claim.high < 0 else ("PG lower" if claim.low > 0 else "not separated")
            diff = (claim.estimate, claim.low, claim.high)
        rows.append({"p_bug": p, "penalty": m, "DG": np.nanmean(dg), "PG": np.nanmean(pg),
                     **dict(zip(("DG − PG", "low", "high"), diff)), "verdict": verdict})
table = pd.DataFrame(rows)
print(table.round(3).to_string(index=False))

# %% [markdown]
# **What the paper-fidelity map shows** (the rows above; 8 seeds, exact sign-flip intervals). Without
# a penalty PG ends below DG at every p_bug (DG − PG ≈ +0.18 to +0.27, intervals above 0): the
# reference configuration's reversal of the paper's claim is not a corner of the map but its whole
# unpenalised row. A penalty makes the landmine a real failure, and then neither method learns the
# task in 600 steps: at m = −0.5 DG ends slightly below PG where the interval separates them
# (p_bug = 0.1 and 0.3, by 0.02–0.04, both near the error of a fixed answer, 0.5), and at m = −1
# both collapse (identical per-seed errors at p_bug = 0.1 and 0.3). Where DG's advantage holds:
# nowhere by a margin that matters at this budget. Quick fidelity's numbers differ (H = 2).

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for ax, method in zip(axes[:2], ("PG", "DG")):
    grid = table.pivot(index="penalty", columns="p_bug", values=method).loc[M, P]
    im = ax.imshow(grid.to_numpy(), cmap="viridis_r", vmin=0, vmax=0.5, aspect="auto")
    for (i, j), v in np.ndenumerate(grid.to_numpy()):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w" if v > 0.25 else "k", fontsize=8)
    ax.set(xticks=range(len(P)), xticklabels=[f"{p:g}" for p in P], yticks=range(len(M)),
           yticklabels=[f"{m:g}" for m in M], xlabel="p_bug", ylabel="landmine penalty m",
           title=f"{method}: final error (mean over seeds)")
fig.colorbar(im, ax=axes[:2], shrink=0.8, label="final error")
diff = table.pivot(index="penalty", columns="p_bug", values="DG − PG").loc[M, P]
bound = max(0.05, float(np.nanmax(np.abs(diff.to_numpy()))))
im = axes[2].imshow(diff.to_numpy(), cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto")
for (i, j), v in np.ndenumerate(diff.to_numpy()):
    verdict = table[(table.p_bug == P[j]) & (table.penalty == M[i])].verdict.iloc[0]
    axes[2].text(j, i, f"{v:+.2f}\n{verdict.replace(' (', chr(10) + '(')}", ha="center", va="center", fontsize=7)
axes[2].set(xticks=range(len(P)), xticklabels=[f"{p:g}" for p in P], yticks=range(len(M)),
            yticklabels=[f"{m:g}" for m in M], xlabel="p_bug", title="DG − PG (blue: DG lower)")
fig.colorbar(im, ax=axes[2], shrink=0.8)
seeds = frame.replicate.nunique()
save_figure(fig, "actor-bug-map", note=f"fidelity={fidelity}, H = {f['map_H']}, "
            f"{budget_note('actor-bug-map', f['map_steps'], seeds)}",
            bands="verdicts: exact sign-flip 95% intervals of the paired difference")
print(book.table())
book.check(require_asserted=fidelity != "quick")  # quick: every cell is reported
