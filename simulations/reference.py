"""The sandbox against the papers' own code (google-deepmind/egg, run from the fork plugyawn/egg;
provenance in ``simulations/data/README.md``): reference-match and the actor-bug map.

**reference-match**: the reference launcher's config (``experiments/dpg/run.py``: token reversal
H = 10, V = 2, reward = fraction of positions correct, Adam 3e-4, 10 prompts × 10 samples, the
group-mean baseline), DG and the reference's "reinforce" (our PG), clean and under five friction
configurations (``CONFIGS``). The reference's curves are committed data: ``egg_reversal_h10.csv``
(clean, 1,000 steps) and ``egg_reversal_frictions.csv`` (the frictions, 600 steps, with a
friction-free evaluation of its learner added by our driver — its own ``learner_reward`` samples
through the friction actor).

**The claim, declared before the friction data existed** (``BAND``, ``WINDOW``): per configuration
and method, the mean learner reward over steps 10–600 (the area under the learner-reward curve,
trapezoids over each code's own logged steps, divided by the window) of the sandbox and of the
reference are equivalent within ±0.1 — TOST: the 90% Welch interval of the difference lies inside
(−0.1, 0.1). 0.1 is a third of the gap between DG and PG the issue reports under the actor bug
(0.66 vs 0.96 at step 600), so equivalence at this band preserves every ordering the figures
assert. Seeds (fixed in advance): DG 10 and PG 20 on each side (the reference's PG is erratic).

**actor-bug map**: DG vs PG final error over p_bug ∈ {0.03, 0.1, 0.3} × landmine penalty
∈ {0, −0.5, −1} (the penalty N(m, 0.1²) on every answer equal to the landmine, the reference's
landmine wrapper), at the reference-match setting: where DG's advantage holds and where it does not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sandbox.frictions.panels import panel_settings
from sandbox.jobs.seeds import offset_seeds
from simulations import ROOT, Figure, Plan, register_figure
from simulations.sequences import FIDELITY, run_jobs

DATA = ROOT / "simulations" / "data"
#: the reference code's clean curves (1,000 steps) and its friction curves (600 steps)
REFERENCE_DATA = DATA / "egg_reversal_h10.csv"
REFERENCE_FRICTIONS = DATA / "egg_reversal_frictions.csv"
#: the reference's clean curves on seeds never used to set the clean band (``CONFIRM_REFERENCE_SEEDS``)
REFERENCE_CONFIRM = DATA / "egg_reversal_h10_confirm.csv"
#: reference loss name → our method label (its "reinforce" is PPO with clip 10⁹: our PG)
REFERENCE_METHODS = {"dg": "DG", "reinforce": "PG"}
#: configuration → the sandbox's friction settings (the same strengths as the reference driver's)
CONFIGS = {
    "clean": [],
    "actor-bug": [("actor bug", 0.1)],
    "reward-corruption": [("reward corruption", 0.3)],
    "rare-discovery": [("rare discovery", 0.03)],
    "staleness-16": [("staleness", 16)],
    "all-four": [("staleness", 4), ("actor bug", 0.1), ("reward corruption", 0.1), ("rare discovery", 0.02)],
}
#: the equivalence band on the mean learner reward, and its window of steps (declared beforehand)
BAND, WINDOW = 0.1, (10, 600)
#: the clean panel's band was set (0d5a2a4) after the clean data had been analysed: it is re-declared
#: here, unchanged, and confirmed on seeds never used to set it — the sandbox's at base seed 1 (seeds
#: 1000–1019, ``SEED_STRIDE``), the reference's DG seeds 10–19 and PG ('reinforce') seeds 20–39
#: (``REFERENCE_CONFIRM``, made after this declaration was committed)
CLEAN_CHOICE = ("the ±0.1 band of the clean panel", "0d5a2a4",
                "the clean curves (sandbox seeds 0–19, reference seeds 0–19)")
CONFIRM_REFERENCE_SEEDS = {"DG": tuple(range(10, 20)), "PG": tuple(range(20, 40))}
#: discrimination (``sandbox.analysis.claim_audit``), declared with the confirmation: a mean learner
#: reward is informative when its interval lies more than one band above chance (V = 2, reward =
#: fraction of positions correct: 0.5), and the same TOST against the other method's reference data
#: must fail — a policy that never learns, or a band wider than the DG–PG gap, shows nothing
CHANCE_REWARD, INFORMATIVE_MARGIN = 0.5, BAND
#: the reference's learner reward is the mean of one fresh 10 × 10 batch; the sandbox evaluates
#: 100 × 10 answers (the same expectation, less noise) on a logarithmic schedule of 60 points
MATCH_REWARD = 0.95
#: the actor-bug map: landmine injection rates × penalty means (std PENALTY_STD where the mean ≠ 0)
MAP_P_BUG, MAP_PENALTY, PENALTY_STD = (0.03, 0.1, 0.3), (0.0, -0.5, -1.0), 0.1


def reference_curves(path: str | Path = REFERENCE_DATA) -> pd.DataFrame:
    """The reference's learner-reward curves: one row per (config, method, seed, step) with columns
    ``config``, ``method`` ('PG' | 'DG'), ``seed``, ``step``, ``reward`` (training batch),
    ``learner_reward`` (its own evaluation) and ``clean_learner_reward`` (friction-free; for the
    clean config the same as ``learner_reward``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be the reference data CSV, got {str(path)!r} (no such file)")
    frame = pd.read_csv(path, comment="#")
    missing = {"method", "seed", "step", "reward", "learner_reward"} - set(frame.columns)
    if missing:
        raise ValueError(f"reference data {path.name} lacks column(s) {sorted(missing)}")
    unknown = set(frame["method"]) - set(REFERENCE_METHODS)
    if unknown:
        raise ValueError(f"reference data {path.name}: method must be one of {list(REFERENCE_METHODS)}, got {sorted(unknown)}")
    if "config" not in frame.columns:
        frame["config"] = "clean"
    if "clean_learner_reward" not in frame.columns:
        frame["clean_learner_reward"] = frame["learner_reward"]
    unknown = set(frame["config"]) - set(CONFIGS)
    if unknown:
        raise ValueError(f"reference data {path.name}: config must be one of {list(CONFIGS)}, got {sorted(unknown)}")
    if not frame[["learner_reward", "clean_learner_reward"]].stack().between(-2, 1).all():
        raise ValueError(f"reference data {path.name}: learner rewards must lie in [-2, 1]")
    frame["method"] = frame["method"].map(REFERENCE_METHODS)
    return frame.sort_values(["config", "method", "seed", "step"], ignore_index=True)


def all_reference_curves() -> pd.DataFrame:
    """The clean and the friction curves of the reference, one frame, with a ``seed_set`` column:
    'original', or 'confirmation' for the clean curves on seeds never used to set the clean band
    (the friction and confirmation files may be absent)."""
    frames = [reference_curves(REFERENCE_DATA).assign(seed_set="original")]
    if REFERENCE_FRICTIONS.is_file():
        frames.append(reference_curves(REFERENCE_FRICTIONS).assign(seed_set="original"))
    if REFERENCE_CONFIRM.is_file():
        frames.append(reference_curves(REFERENCE_CONFIRM).assign(seed_set="confirmation"))
    return pd.concat(frames, ignore_index=True)


def mean_reward(frame: pd.DataFrame, reward: str, window: tuple[int, int] = WINDOW, seed: str = "seed") -> pd.Series:
    """Per seed: the mean of ``reward`` over steps ``window`` — the trapezoid area under the curve
    over the seed's own logged steps inside the window, divided by its length. NaN (a diverged
    seed) where any of those values is NaN."""
    lo, hi = window
    inside = frame[(frame["step"] >= lo) & (frame["step"] <= hi)]
    out = {}
    for key, run in inside.sort_values("step").groupby(seed):
        steps, values = run["step"].to_numpy(float), run[reward].to_numpy(float)
        if steps[0] != lo or steps[-1] != hi:
            raise ValueError(f"{seed} {key}: the window {window} needs values logged at steps {lo} and {hi}, "
                             f"got {steps[0]:g}…{steps[-1]:g}")
        out[key] = np.nan if np.isnan(values).any() else float(np.trapezoid(values, steps) / (hi - lo))
    return pd.Series(out, name=reward).sort_index()


def steps_to_reward(frame: pd.DataFrame, reward: str, threshold: float = MATCH_REWARD) -> np.ndarray:
    """Per seed (``replicate`` or ``seed`` column): the first step its ``reward`` curve reaches
    ``threshold`` (``steps_to_error`` on 1 − reward; the last step where it never does)."""
    from simulations.sequences import steps_to_error

    seed = "replicate" if "replicate" in frame.columns else "seed"
    table = frame.pivot(index=seed, columns="step", values=reward)
    steps = table.columns.to_numpy()
    return steps_to_error(steps, 1 - table.to_numpy(), 1 - threshold, cap=int(steps.max()))


def config_settings(config: str) -> dict:
    """RunConfig fields of a reference-match configuration."""
    return panel_settings(CONFIGS[config])


def match_plan(fidelity: str) -> Plan:
    """The sandbox at the reference launcher's config, per configuration (tag ``config``) and
    method: DG and PG (quick: DG, clean only), the fidelity's seeds per method."""
    f = FIDELITY[fidelity]
    seeds = f.get("match_seeds_by_method", {})

    def jobs(config: str, m: str) -> list:
        return run_jobs(fidelity, m, H=10, steps=f["match_steps"][config], settings=config_settings(config),
                        seeds=seeds.get(m, f["match_seeds"]), log_points=f["match_log_points"])

    plan = [({"config": config, "seed_set": "original"}, jobs(config, m))
            for config in f["match_configs"] for m in f["match_methods"]]
    if f.get("match_confirm"):  # the clean band's confirmation: the same runs one base seed on
        plan += [({"config": "clean", "seed_set": "confirmation"}, offset_seeds(jobs("clean", m), 1))
                 for m in f["match_methods"]]
    return plan


def map_settings(p_bug: float, penalty: float) -> dict:
    landmine = {"p_bug": float(p_bug)}
    if penalty:
        landmine.update(penalty_mean=float(penalty), penalty_std=PENALTY_STD)
    return {"frictions": (("landmine", landmine),)}


def map_plan(fidelity: str) -> Plan:
    """DG and PG at every (p_bug, penalty) cell (tags), the reference-match setting and budget. A
    cell without a penalty is the very run the frictions figure and reference-match make there."""
    f = FIDELITY[fidelity]
    return [({"p_bug": p, "penalty": penalty},
             run_jobs(fidelity, m, H=f["map_H"], steps=f["map_steps"], settings=map_settings(p, penalty),
                      seeds=f["map_seeds"], log_points=f["match_log_points"]))
            for m in ("PG", "DG") for p in f["map_p_bug"] for penalty in f["map_penalty"]]


register_figure(Figure("reference-match", "sequences",
                       "The sandbox vs the reference code (egg), clean and under five frictions: learner reward, H = 10",
                       None, "notebooks/reference_match.py", plan=match_plan))
register_figure(Figure("actor-bug-map", "sequences", "DG vs PG over landmine rate × landmine penalty",
                       None, "notebooks/actor_bug_map.py", plan=map_plan))

__all__ = ["BAND", "CHANCE_REWARD", "CLEAN_CHOICE", "CONFIGS", "CONFIRM_REFERENCE_SEEDS", "INFORMATIVE_MARGIN", "MAP_PENALTY", "MAP_P_BUG", "MATCH_REWARD", "REFERENCE_CONFIRM", "REFERENCE_DATA", "REFERENCE_FRICTIONS",
           "REFERENCE_METHODS", "WINDOW", "all_reference_curves", "config_settings", "map_plan", "map_settings",
           "match_plan", "mean_reward", "reference_curves", "steps_to_reward"]
