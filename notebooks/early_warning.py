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
# # early-warning: does a logged signal warn of a collapse before it happens?
#
# Published runs say it does: VCPO finds collapse "reliably predicted by effective sample size
# (ESS) and unstable gradient norms", GAC that stale-aligned consecutive gradients precede
# overshooting, Precision-RL that the sampler–trainer KL climbs before BF16 GRPO collapses, and
# verl's rollout-correction guide warns at ESS < 0.3, a mean IS weight outside [0.5, 2] and
# |KL| > 0.1. Here every run of the `published-outcomes` cases at the reference scale and a grid
# (staleness × mismatch × estimator, `simulations.early_warning.GRID`) is read at every logged
# step: is a collapse (`sandbox.analysis.collapse`) coming within the next N steps, and what did
# each signal say at that step?
#
# Declared before any run (`simulations.early_warning`): N, the direction in which each signal
# warns, the form each row reads (its level; grad_norm's rise against its own history, VCPO's
# "spikes"), verl's thresholds and the rise alarm (z ≥ 3). Each signal's ROC AUC pools every
# observation; its interval resamples runs (independent seeds), stratified by whether they
# collapsed, and is given only from ten runs per stratum on. An AUC whose interval reaches 0.5
# means the signal does **not** warn here — as useful to a user as one that does. Lead time and
# false-alarm rate are measured for verl's alarms and for each signal's rise alarm.

# %%
import numpy as np

from sandbox.analysis.alarms import ALARMS
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.plotting import plt, save_figure, use_style
from simulations import fidelity_from_env, results
from simulations.cases.warning import roc_curve
from simulations.early_warning import DIRECTIONS, FIGURE, FORM, HORIZON, claims

fidelity = fidelity_from_env()
frame = results(FIGURE)
book = ClaimBook(FIGURE)
use_style()
m = claims(book, frame, fidelity)
obs, N = m["obs"], HORIZON[fidelity]
runs = obs.runs
collapsed = int(runs["collapse_step"].notna().sum())
print(f"{len(runs)} runs, {collapsed} collapsed; {int((obs.label == 1).sum())} observations with a collapse within "
      f"{N} steps, {int((obs.label == 0).sum())} without")

# %%
fig, axes = plt.subplots(1, 4, figsize=(20, 4.6))
ax = axes[0]
for signal in DIRECTIONS:
    name = f"{signal}: {FORM[signal]}"
    if np.isnan(m["auc"][name]["auc"]):
        continue
    fpr, tpr = roc_curve(obs, name)
    ax.plot(fpr, tpr, lw=1, label=f"{name} ({m['auc'][name]['auc']:.2f})")
for alarm, marker in zip(ALARMS, "osD"):
    a = m["alarms"][alarm.name]
    on = obs.scores[alarm.name] > 0
    pos, neg = obs.label == 1, obs.label == 0
    if pos.any() and neg.any():
        ax.plot(on[neg].mean(), on[pos].mean(), marker, color="k", ms=6, mfc="none", label=f"verl: {alarm.name}")
ax.plot([0, 1], [0, 1], ":", color="0.6")
ax.set(xlabel="false-positive rate (observations)", ylabel="true-positive rate", title=f"ROC: collapse within {N} steps")
ax.legend(fontsize=5, loc="lower right")

ax = axes[1]
names = [f"{s}: {form}" for s in DIRECTIONS for form in ("level", "rise")] + [a.name for a in ALARMS]
y = np.arange(len(names))
for i, name in enumerate(names):
    a = m["auc"][name]
    if np.isnan(a["auc"]):
        ax.text(0.5, i, "no collapse / not logged", fontsize=5, va="center", ha="center", color="0.5")
        continue
    err = None if np.isnan(a["low"]) else [[a["auc"] - a["low"]], [a["high"] - a["auc"]]]
    ax.errorbar(a["auc"], i, xerr=err, fmt="o" if err else "x", ms=3, capsize=2,
                color="k" if name.split(":")[0] in DIRECTIONS and FORM[name.split(":")[0]] in name else "0.55")
ax.axvline(0.5, ls=":", color="0.6")
ax.set_yticks(y, names, fontsize=5)
ax.invert_yaxis()
ax.set(xlim=(0, 1), xlabel="ROC AUC (95% run bootstrap; x: too few runs for one)", title="AUC of every score")

ax = axes[2]
for name, al in m["alarms"].items():
    det, fa, lead = al["detection"], al["false_alarm"], al["lead"]
    if np.isnan(det[0]) or np.isnan(fa[0]):
        continue
    verl = name in {a.name for a in ALARMS}
    ax.errorbar(fa[0], det[0], xerr=None if np.isnan(fa[1]) else [[fa[0] - fa[1]], [fa[2] - fa[0]]],
                yerr=[[det[0] - det[1]], [det[2] - det[0]]], fmt="s" if verl else "o", ms=4 if verl else 3,
                color="k" if verl else "0.5", capsize=2)
    ax.annotate(f"{name}" + ("" if np.isnan(lead[0]) else f", lead {lead[0]:.0f}"), (fa[0], det[0]), fontsize=4.5,
                xytext=(3, 2), textcoords="offset points")
ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="false-alarm rate (share of a run's calm steps)",
       ylabel=f"collapses warned within {N} steps", title="Alarms: detection, false alarms, median lead (steps)")
ax = axes[3]
names = list(m["versus"])
base = next(iter(m["versus"].values()))["baseline"] if names else (np.nan,) * 3
ax.axvspan(base[1], base[2], color="0.9")
ax.axvline(base[0], color="0.5", lw=1, label=f"configuration only, pooled ({base[0]:.2f})")
for i, name in enumerate(names):
    v = m["versus"][name]
    for key, color, dy in (("pooled", "0.6", -0.15), ("within", "k", 0.15)):
        e, lo, hi = v[key]
        if np.isnan(e):
            continue
        err = None if np.isnan(lo) else [[e - lo], [hi - e]]
        ax.errorbar(e, i + dy, xerr=err, fmt="o", ms=3, capsize=2, color=color,
                    label=f"{key} AUC" if i == 0 else None)
ax.axvline(0.5, ls=":", color="0.6")
ax.set_yticks(np.arange(len(names)), names, fontsize=5)
ax.invert_yaxis()
ax.legend(fontsize=5, loc="lower right")
ax.set(xlim=(0, 1), xlabel="ROC AUC (95% run bootstrap)",
       title="Within a configuration, and against a score that knows only the configuration")
save_figure(fig, FIGURE, note=f"fidelity={fidelity}: {len(runs)} runs ({collapsed} collapsed), N = {N} steps",
            bands="AUC: 95% percentile bootstrap over runs stratified by collapse (none below 10 runs per stratum); "
            "detection: exact Clopper–Pearson 95%; false alarms: 95% t-interval over runs; within-configuration AUC "
            "and the configuration baseline: the same run bootstrap, one fixed generator")

# %% [markdown]
# ## Every score, and where it does not warn

# %%
for name, a in m["auc"].items():
    text = f"{a['auc']:.3f} [{a['low']:.3f}, {a['high']:.3f}]"
    verdict = ("warns" if a["low"] > 0.5 else "does not warn here" if a["high"] >= 0.5 else "warns the other way") \
        if not np.isnan(a["low"]) else "no interval (too few runs)" if not np.isnan(a["auc"]) else "not evaluable"
    print(f"{name:38s} AUC {text:28s} {verdict}")
ranked = sorted(((a["auc"], n) for n, a in m["auc"].items() if not np.isnan(a["auc"])), reverse=True)
if ranked:
    print(f"best: {ranked[0][1]} ({ranked[0][0]:.3f}); worst: {ranked[-1][1]} ({ranked[-1][0]:.3f})")
for name, al in m["alarms"].items():
    det, fa, lead = al["detection"], al["false_alarm"], al["lead"]
    print(f"{name:38s} warned {al['warned']}/{al['collapses']} (detection {det[0]:.2f}), median lead {lead[0]:.0f} "
          f"[{lead[1]:.0f}, {lead[2]:.0f}] steps, false alarms {fa[0]:.3f} [{fa[1]:.3f}, {fa[2]:.3f}]")

# %% [markdown]
# ## Beyond the configuration
#
# A signal counts as a warning only if its pooled AUC beats a score that knows only the
# configuration (`simulations.cases.warning_config`); the within-configuration AUC compares the
# steps before a collapse with the calm steps of the same configuration, where that score has 0.5.
# verl's alarms: lead from the first firing before the collapse (uncapped), false alarms per calm step.

# %%
for name, v in m["versus"].items():
    d, w, p = v["difference"], v["within"], v["pooled"]
    print(f"{name:38s} pooled {p[0]:.3f}, within {w[0]:.3f} [{w[1]:.3f}, {w[2]:.3f}], minus configuration "
          f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]: {'warns' if v['warns'] else 'does not beat the configuration'}")
base = next(iter(m["versus"].values()))["baseline"]
print(f"configuration only: pooled AUC {base[0]:.3f} [{base[1]:.3f}, {base[2]:.3f}]")
for name, u in m["uncapped"].items():
    lead, fa = u["lead"], u["false_alarm"]
    print(f"{name:38s} fired before {u['fired_before']}/{u['collapses']} collapses, median lead {lead[0]:.0f} "
          f"[{lead[1]:.0f}, {lead[2]:.0f}] steps (uncapped); on at {fa[0]:.3f} [{fa[1]:.3f}, {fa[2]:.3f}] of calm steps")

# %% [markdown]
# ## Claims

# %%
print(book.table())
book.check(require_asserted=False)  # a row is asserted only at paper fidelity and where enough runs collapsed to test it
