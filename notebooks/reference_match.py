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
# # The sandbox against the reference code, clean and under five frictions
#
# The Delightful papers' own code (google-deepmind/egg, JAX/Flax; run from the fork plugyawn/egg —
# provenance in `simulations/data/README.md`) and the sandbox on the same launcher config
# (`experiments/dpg/run.py`): token reversal H = 10, V = 2, reward = fraction of positions correct,
# Adam 3e-4, 10 prompts × 10 samples per step, group-mean baseline, one update per batch. Methods:
# DG (η = 1, λ = 10⁻⁶) and the reference's "reinforce" — PPO with clip 10⁹, i.e. token-level
# importance sampling with the recorded μ, our **PG**. Configurations: clean (1,000 steps) and,
# for 600 steps, actor bug 0.1 (the constant all-zeros landmine), reward corruption 0.3
# (Bernoulli), rare discovery 0.03, a fixed delay of 16 steps, and all four at once (D = 4, bug 0.1,
# Bernoulli 0.1, discovery 0.02). The reference's curves are committed data; the sandbox's are
# run here. Learner reward = mean reward of fresh answers sampled by the current learner *without*
# frictions (the reference's own `learner_reward` samples through its friction actor: our driver
# adds a friction-free evaluation, `clean_learner_reward`).
#
# **Claim, declared before the friction data existed** (`simulations.reference.BAND`): per
# configuration and method, the mean learner reward over steps 10…K (K the configuration's
# budget) of the two codes is *equivalent* within ±0.1 — TOST: the 90% Welch interval of the
# difference (sandbox − reference) lies inside (−0.1, 0.1). The band is a third of the DG–PG gap
# under the actor bug, so equivalence keeps every ordering the figures assert. Seeds, fixed in
# advance: 10 DG and 20 PG on each side (the reference's PG is erratic: on the clean config it
# reaches reward 0.95 anywhere from step 209 to never). The steps to reward 0.95 of the clean
# config are shown as well (reported).
#
# **Fidelity.** Quick (the test suite): DG only, clean, 5 sandbox seeds (one batched job), 320
# steps, the window 10…320. Paper: every configuration, both methods, as above.

# %%
import pandas as pd

from sandbox.analysis.claims import Choice, ClaimBook
from sandbox.analysis.plotting import color, plt, save_figure, use_style
from simulations import fidelity_from_env, results
from simulations.reference import (
    BAND,
    CHANCE_REWARD,
    CLEAN_CHOICE,
    CONFIRM_REFERENCE_SEEDS,
    INFORMATIVE_MARGIN,
    MATCH_REWARD,
    all_reference_curves,
    mean_reward,
    steps_to_reward,
)
from simulations.sequences import FIDELITY

fidelity = fidelity_from_env()
f = FIDELITY[fidelity]
ours = results("reference-match")
ours = ours.assign(learner_reward=1 - ours["error"])
ref = all_reference_curves()
book = ClaimBook("reference-match")
use_style()
methods, configs = list(f["match_methods"]), list(f["match_configs"])
missing = [c for c in configs if c not in set(ref.config)]
if missing:
    raise ValueError(f"the reference data have no {missing} curves: simulations/data/README.md says how to make them")

# %%
fig, axes = plt.subplots(len(methods), len(configs), figsize=(3.2 * len(configs), 2.7 * len(methods)),
                         sharey=True, squeeze=False)
for row, m in zip(axes, methods):
    for ax, config in zip(row, configs):
        budget = f["match_steps"][config]
        for who, frame, column, style in (("reference (egg)", ref, "clean_learner_reward", "--"),
                                          ("sandbox", ours, "learner_reward", "-")):
            seed = "seed" if who.startswith("reference") else "replicate"
            sub = frame[(frame.method == m) & (frame.config == config) & (frame.step <= budget)
                        & (frame.seed_set == "original")]
            table = sub.pivot(index=seed, columns="step", values=column)
            steps = table.columns.to_numpy()
            ax.plot(steps, table.median(0), style, color=color(m), label=f"{who}, median of {len(table)}")
            ax.fill_between(steps, table.quantile(0.25), table.quantile(0.75), color=color(m),
                            alpha=0.25 if who == "sandbox" else 0.12, lw=0)
        ax.set(title=f"{m}, {config}", xlabel="step")
        ax.set_ylim(0.3, 1.02)
    row[0].set(ylabel="learner reward (IQR band)")
    row[0].legend(fontsize=6, loc="lower right")
seeds = ", ".join(f"{m} {ours[(ours.method == m) & (ours.seed_set == 'original')].replicate.nunique()}/"
                  f"{ref[(ref.method == m) & (ref.seed_set == 'original')].seed.nunique()}" for m in methods)
save_figure(fig, "reference-match", note=f"fidelity={fidelity}, {f['match_steps']['clean']:,} steps clean, "
            f"600 under frictions (the reference launcher's own budget: 1,000), seeds sandbox/reference: {seeds}",
            bands="bands: interquartile range over seeds, lines the median")

# %% [markdown]
# ## Claims

# %% [markdown]
# **Evidence only where the test can tell methods apart** (`sandbox.analysis.claim_audit`, declared
# with `simulations.reference.CHANCE_REWARD`, `INFORMATIVE_MARGIN`): each compared mean must lie more
# than one band above chance (0.5), and the same TOST of the sandbox's curve against the reference's
# *other* method must fail. A row that fails either is reported with the reason. The clean band was set
# after the clean data had been analysed: those rows are reported, and the band is confirmed on seeds
# never used to set it (sandbox 1000–1019, reference DG 10–19 and PG 20–39).

# %%
OTHER = {"DG": "PG", "PG": "DG"}
choice = Choice(*CLEAN_CHOICE)
rows = []


def equivalence(name: str, statement: str, config: str, m: str, seed_set: str):
    window = (10, f["match_steps"][config])
    mine = ours[(ours.method == m) & (ours.config == config) & (ours.seed_set == seed_set)]
    theirs = ref[(ref.config == config) & (ref.seed_set == seed_set)]
    a = mean_reward(mine, "learner_reward", window, seed="replicate")
    b = mean_reward(theirs[theirs.method == m], "clean_learner_reward", window)
    other = mean_reward(theirs[theirs.method == OTHER[m]], "clean_learner_reward", window)
    claim = book.equivalent(name, statement.format(window=window), a.to_numpy(), b.to_numpy(), band=BAND, worse="low",
                            trivial=CHANCE_REWARD, margin=INFORMATIVE_MARGIN, other=other.to_numpy(),
                            other_label=f"the reference's {OTHER[m]}")
    rows.append({"config": config, "seeds": seed_set, "method": m, "sandbox": a.mean(), "reference": b.mean(),
                 "difference [90%]": f"{claim.estimate:+.3f} [{claim.low:+.3f}, {claim.high:+.3f}]",
                 "verdict": claim.verdict, "seed counts": f"{a.size}/{b.size}"})
    return claim


confirm = bool(f.get("match_confirm"))
for config in configs:
    for m in methods:
        claim = equivalence(f"{m.lower()}-{config}-matches-reference",
                            f"{config}, {m}: the sandbox's mean learner reward over steps {{window[0]}}–{{window[1]}} "
                            f"equals the reference code's within ±{BAND}", config, m, "original")
        if config == "clean" and confirm:
            book.selection(claim, choice)
if confirm:
    if not (ref.seed_set == "confirmation").any():
        raise ValueError("the reference's confirmation curves are missing: simulations/data/README.md says how to make them")
    for m in methods:
        seeds = (f"sandbox seeds {ours[(ours.method == m) & (ours.seed_set == 'confirmation')].replicate.min()}–"
                 f"{ours[(ours.method == m) & (ours.seed_set == 'confirmation')].replicate.max()}, reference seeds "
                 f"{CONFIRM_REFERENCE_SEEDS[m][0]}–{CONFIRM_REFERENCE_SEEDS[m][-1]}")
        claim = equivalence(f"{m.lower()}-clean-matches-reference-confirmed",
                            f"clean, {m}, on seeds never used to set the band ({seeds}): the sandbox's mean learner "
                            f"reward over steps {{window[0]}}–{{window[1]}} equals the reference code's within ±{BAND}",
                            "clean", m, "confirmation")
        book.confirmed(claim, choice, seeds)
ours, ref = ours[ours.seed_set == "original"], ref[ref.seed_set == "original"]  # the steps-to rows: the original seeds
budget = f["match_steps"]["clean"]
clean = {m: (steps_to_reward(ours[(ours.method == m) & (ours.config == "clean")], "learner_reward"),
             steps_to_reward(ref[(ref.method == m) & (ref.config == "clean") & (ref.step <= budget)],
                             "clean_learner_reward"))
         for m in methods}
for m, (a, b) in clean.items():
    book.report(book.equivalent(f"{m.lower()}-clean-steps-to-{MATCH_REWARD}",
                                f"clean, {m}: steps to learner reward {MATCH_REWARD} within ×1.5 of the reference's "
                                "(a seed that never gets there counts as the budget)", a, b, band=1.5, log=True))
print(pd.DataFrame(rows).to_string(index=False))
print(book.table())
book.check(require_asserted=fidelity != "quick")  # quick: 5 seeds show no gap to the other method wider than the band
