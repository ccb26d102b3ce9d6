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
# # The gate: effective weight w·A of PG, DG, PPO and PMPO
#
# For a single sample with advantage A and learner probability π(a), every estimator's gradient
# is c·∇log π(a); this notebook plots c (computed by autograd through the library's estimators,
# not by formula) as a function of A and of π(a).
# Claim: DG amplifies rare successes and suppresses rare failures; PG is sign-symmetric.

# %%
import numpy as np

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import color, plt, save_figure, use_style
from simulations import fidelity_from_env, results

fidelity = fidelity_from_env()
table = results("gate")
book = ClaimBook("gate")
use_style()

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
rare, common = table["pi"].min(), table["pi"].max()
styles = {"PG": "-", "DG η=0.5": "-", "DG η=1": "--", "DG η=2": ":", "PPO (r=1)": "-.", "PMPO": "-"}
for ax, pi_value, title in ((axes[0], rare, f"rare action, π = {rare:.0e}"), (axes[1], common, f"common action, π = {common:.2f}")):
    for method, style in styles.items():
        sub = table[(table.method == method) & np.isclose(table.pi, pi_value)].sort_values("A")
        c = color("dg" if method.startswith("DG") else method.split(" ")[0].lower())
        ax.plot(sub.A, sub.weight, style, label=method, color=c, alpha=0.6 if "DG" in method and "0.5" not in method else 1)
    ax.set(xlabel="advantage A", ylabel="effective weight c = w·A", title=title)
axes[0].legend(loc="upper left")
for method in ("PG", "DG η=0.5"):
    for A, marker in ((1.0, "success (A = +1)"), (-1.0, "failure (A = −1)")):
        sub = table[(table.method == method) & np.isclose(table.A, A)].sort_values("pi")
        axes[2].plot(sub.pi, sub.weight / A, "-" if A > 0 else "--", color=color("dg" if "DG" in method else "pg"),
                     label=f"{method}, {marker}")
axes[2].set(xscale="log", xlabel="π(a)", ylabel="gate w = c / A", title="gate vs probability")
axes[2].legend(fontsize=7)
save_figure(fig, "gate", note=f"fidelity={fidelity}", bands="no bands: exact values, no sampling")

# %% [markdown]
# ## Claims (exact: no sampling is involved, so the intervals are degenerate)
#
# PG's sign symmetry and the complementarity of DG's gates are identities of their formulas (sanity
# checks); the amplification and suppression ratios are the figure's claims.

# %%
def weight(method, A, pi):
    sub = table[(table.method == method) & np.isclose(table.A, A) & np.isclose(table.pi, pi)]
    return float(sub.weight.iloc[0])


pg = table[table.method == "PG"].pivot(index="pi", columns="A", values="weight")
book.close("pg-sign-symmetric", "PG's weight is odd in A at every π: c(−A) = −c(A)",
           pg.to_numpy(), -pg.to_numpy()[:, ::-1], tol=1e-12)
dg = table[table.method == "DG η=0.5"].pivot(index="pi", columns="A", values="weight")
gate_sum = dg[1.0] / 1.0 + dg[-1.0] / -1.0  # w(+1) + w(−1) = σ(x) + σ(−x) = 1
book.close("dg-gate-complementary", "DG's gates for A = ±1 sum to 1 at every π (σ(x) + σ(−x) = 1)",
           gate_sum.to_numpy(), np.ones(len(gate_sum)), tol=1e-12)
for eta in ("DG η=0.5", "DG η=1", "DG η=2"):
    amp = weight(eta, 1.0, rare) / weight(eta, 1.0, common)
    book.exact(f"{eta}-amplifies-rare-success",
               f"{eta}: a rare success (π={rare:.0e}) weighs > 1.5× a common one (value: the ratio)", amp, amp > 1.5)
    sup = weight(eta, -1.0, rare) / weight(eta, -1.0, common)
    book.exact(f"{eta}-suppresses-rare-failure",
               f"{eta}: a rare failure weighs < 0.1× a common one (value: the ratio)", sup, sup < 0.1)
print(book.table())
book.check()
