"""Transformer sequence tasks (shared/spec/figures.md, "Transformer sequence tasks"):
reversal-learning, reversal-scaling, frictions, all-frictions, kondo.

Every run is the library's actor-learner loop (``sandbox.runtime.loop.train``) on the
``reverse_copy`` task with the spec's transformer, Adam 3e-4, 10 prompts × 10 samples per step and
the group-mean baseline. At full fidelity every seed is its own job (population 1, run in parallel
processes); at quick fidelity the seeds of a configuration run as one population (one batched
job). Jobs run single-threaded (the model is tiny: one intra-op thread is faster, and immune to
OpenMP spin-waits on a busy machine).

Methods: the one method table (``sandbox.scoring.recipes.RECIPES``): PG = the reference's
"reinforce" (token-level IS with the recorded μ); REINFORCE (no ratio); PPO (clip 0.2, π_prox = μ);
PMPO (α = ½); IS-PG (exact sequence IS with the reported μ); DG (η = 1, λ = 10⁻⁶); VCPO = sequence
TIS (C = 8) + the min-variance baseline + the ESS-scaled step; GAC = PPO + gradient-alignment
control against the raw gradient.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sandbox.advantages import make_advantage
from sandbox.analysis.stability import seed_mean
from sandbox.core.seeding import derived_generator
from sandbox.estimators import make_estimator
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.learner import learner_terms
from sandbox.runtime.sweep import Job, intra_op_threads
from sandbox.tasks import make_task
from sandbox.scoring.recipes import method
from simulations import ROOT, Figure, register_figure

METHODS: dict[str, dict] = {m: method(m) for m in ("PG", "REINFORCE", "PPO", "PMPO", "IS-PG", "DG", "VCPO", "GAC")}

#: the reference launcher's task (egg experiments/dpg/run.py): reward = fraction of positions correct (κ = 1)
TASK = {"match": "per_position"}

#: the four friction panels: (label, how a strength enters the run config)
PANELS = {
    "staleness": "actor D steps behind (fixed delay)",
    "actor bug": "landmine: the constant all-zeros answer with prob. p, reported μ = 1",
    "reward corruption": "Bernoulli: reward replaced by 0 or 1 with prob. p",
    "rare discovery": "correct answer injected with prob. p, reported μ = 1",
}

FIDELITY = {
    "quick": {
        "seeds": 4, "batched_seeds": True, "eval": {"eval_mode": "exact"}, "log_points": 30,
        "large_eval": {"eval_mode": "sampled", "eval_prompts": 20, "eval_samples": 10}, "large_log_points": 15,
        "H": 2, "steps": 150,
        "learning_H": 10, "learning_steps": 150, "learning_seeds": 5, "learning_methods": ("PG", "PMPO", "DG"),
        "scaling_H": (1, 2, 3), "scaling_V": (), "scaling_V_H": 2, "scaling_methods": ("PG", "DG"),
        "scaling_steps": {1: 60, 2: 150, 3: 240}, "threshold": 0.3,
        "friction_methods": ("PG", "DG"), "friction_extra": {}, "friction_steps": 150,
        "strengths": {"staleness": (0, 16), "actor bug": (0, 0.3), "reward corruption": (0, 0.3),
                      "rare discovery": (0, 0.05)},
        "all_H": (10,), "all_methods": ("PG", "DG"), "all_steps": {10: 200}, "all_seeds": 5,
        "all_strengths": {"staleness": 4, "actor bug": 0.1, "reward corruption": 0.1, "rare discovery": 0.02},
        "solved": 0.2,
        "kondo_pcts": (0.1, 0.3, 1.0), "kondo_controls": (0.3,), "kondo_dg": False, "timing_H": 10, "timing_reps": 5,
        "timing_pcts": (0.03, 0.1, 0.3, 1.0),
        "match_seeds": 5, "match_steps": 320, "match_methods": ("DG",),
    },
    # the papers' H = 10, V = 2 everywhere, pruned to fit ≤ 2 h on 2 cores with the other families
    # (README, "Paper fidelity"): 5 seeds (10 where a curve is compared with the reference or a
    # baseline), 600–1000 steps (DG solves H = 10 in ~200, PG in ~600), PPO only where it differs from
    # PG (one update per fresh batch makes its ratio 1), IS-PG left out of the friction panels
    "paper": {
        "seeds": 5, "batched_seeds": False, "eval": {"eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10},
        "log_points": 30, "H": 10, "steps": 600,
        "large_eval": {"eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10}, "large_log_points": 30,
        # the reference launcher's evaluation and logging: PG's and DG's runs are reference-match's
        "learning_H": 10, "learning_steps": 1000, "learning_seeds": 10, "learning_methods": ("PG", "PMPO", "DG"),
        "learning_task": "match",
        "scaling_H": (2, 4, 6, 8, 10), "scaling_V": (3, 4), "scaling_V_H": 4, "scaling_methods": ("PG", "DG"),
        "scaling_steps": {2: 300, 4: 400, 6: 600, 8: 800, 10: 1000}, "threshold": 0.3,
        "friction_methods": ("PG", "PMPO", "DG"), "friction_extra": {"staleness": ("VCPO", "GAC")},
        "friction_steps": 500,
        "strengths": {"staleness": (0, 4, 16), "actor bug": (0, 0.1, 0.3),
                      "reward corruption": (0, 0.1, 0.3), "rare discovery": (0, 0.01, 0.03)},
        "all_H": (6, 8, 10), "all_methods": ("PG", "PPO", "PMPO", "DG"), "all_steps": {6: 800, 8: 800, 10: 800},
        "all_strengths": {"staleness": 4, "actor bug": 0.1, "reward corruption": 0.1, "rare discovery": 0.02},
        "solved": 0.2,
        "kondo_pcts": (0.03, 0.1, 0.3, 1.0), "kondo_controls": (0.1, 0.3), "kondo_dg": False, "timing_H": 10,
        "timing_reps": 20, "timing_pcts": (0.01, 0.03, 0.1, 0.3, 1.0),
        "match_seeds": 20, "match_steps": 1000, "match_methods": ("DG", "PG"), "match_seeds_by_method": {"DG": 10},
    },
    "full": {
        "seeds": 10, "batched_seeds": False, "eval": {"eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10},
        "log_points": 40, "H": 10, "steps": 5000,
        "large_eval": {"eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10}, "large_log_points": 40,
        "learning_H": 10, "learning_steps": 5000, "learning_seeds": 10, "learning_methods": ("PG", "PPO", "PMPO", "DG"),
        "scaling_H": (2, 4, 6, 8, 10), "scaling_V": (2, 3, 4, 6, 8), "scaling_V_H": 4,
        "scaling_methods": ("PG", "PPO", "PMPO", "DG"),
        "scaling_steps": {2: 1000, 4: 3000, 6: 5000, 8: 8000, 10: 10000}, "threshold": 0.3,
        "friction_methods": ("PG", "PPO", "PMPO", "IS-PG", "DG"), "friction_extra": {"staleness": ("VCPO", "GAC")},
        "friction_steps": 3000,
        "strengths": {"staleness": (0, 4, 16, 64), "actor bug": (0, 0.1, 0.3, 0.5),
                      "reward corruption": (0, 0.1, 0.3, 0.5), "rare discovery": (0, 0.01, 0.03, 0.1)},
        "all_H": (4, 6, 8, 10, 12), "all_methods": ("PG", "PPO", "PMPO", "IS-PG", "DG"),
        "all_steps": {4: 3000, 6: 3000, 8: 3000, 10: 3000, 12: 3000},
        "all_strengths": {"staleness": 4, "actor bug": 0.1, "reward corruption": 0.1, "rare discovery": 0.02},
        "solved": 0.2,
        "kondo_pcts": (0.01, 0.03, 0.1, 0.3, 1.0), "kondo_controls": (0.1, 0.3), "kondo_dg": True, "timing_H": 10,
        "timing_reps": 50,
        "timing_pcts": (0.01, 0.03, 0.1, 0.3, 1.0),
        "match_seeds": 20, "match_steps": 1000, "match_methods": ("DG", "PG"), "match_seeds_by_method": {"DG": 10},
    },
}


# ----------------------------------------------------------------------------- run configs and jobs
def friction_settings(panel: str, strength: float) -> dict:
    """RunConfig fields of one friction panel at ``strength`` (0 = none)."""
    if strength == 0:
        return {}
    if panel == "staleness":
        return {"staleness": {"kind": "fixed", "D": int(strength)}}
    if panel == "actor bug":
        return {"frictions": (("landmine", {"p_bug": float(strength)}),)}
    if panel == "reward corruption":
        return {"frictions": (("bernoulli_reward", {"p": float(strength)}),)}
    if panel == "rare discovery":
        return {"frictions": (("rare_discovery", {"p_disc": float(strength)}),)}
    raise ValueError(f"panel must be one of {list(PANELS)}, got {panel!r}")


def combine(settings: list[dict]) -> dict:
    out: dict = {}
    for s in settings:
        if "staleness" in s:
            out["staleness"] = s["staleness"]
        if "frictions" in s:
            out["frictions"] = out.get("frictions", ()) + s["frictions"]
    return out


def run_jobs(fidelity: str, method: str, *, H: int, steps: int, V: int = 2, settings: dict | None = None,
             task: dict | None = None, spec: dict | None = None, seeds: int | None = None,
             log_points: int | None = None, **meta) -> list[Job]:
    """The jobs of one configuration: one population job (quick) or one job per seed (full).
    ``spec`` (RunConfig fields of the method) defaults to ``METHODS[method]``; ``seeds`` and
    ``log_points`` to the fidelity's; ``task`` overrides the task fields (``TASK``, evaluation)."""
    f = FIDELITY[fidelity]
    seeds = seeds or f["seeds"]
    evaluation = dict(f["eval"])
    if evaluation.get("eval_mode") == "exact" and V ** (2 * H) > 1 << 14:  # too many pairs to enumerate
        evaluation, log_points = f["large_eval"], log_points or f["large_log_points"]
    task_kwargs = {"H": H, "V": V, **TASK, **evaluation, **(task or {})}
    spec = METHODS[method] if spec is None else spec
    base = RunConfig(task="reverse_copy", task_kwargs={}, lr=3e-4, steps=steps,
                     log_points=log_points or f["log_points"], label=method, **spec, **(settings or {}))
    meta = {"method": method, "H": H, "V": V, **meta}
    if f["batched_seeds"]:
        return [_job(base.replace(task_kwargs={**task_kwargs, "population": seeds}, seed=0), meta)]
    return [_job(base.replace(task_kwargs={**task_kwargs, "population": 1}, seed=s), meta) for s in range(seeds)]


def _job(config: RunConfig, meta: dict) -> Job:
    params = config.to_dict()
    params.pop("label")
    return Job("simulations.sequences:train_run", {"config": params, "meta": meta}, config.label)


def train_run(config: dict, meta: dict) -> pd.DataFrame:
    """One training run, single-threaded; adds ``replicate`` (the seed's id across batched and
    separate runs: seed · population + member) and the ``meta`` columns (method, H, V, …)."""
    from sandbox.runtime.loop import train

    cfg = RunConfig.from_dict(config)
    with intra_op_threads(1):
        frame = train(cfg)
    population = int(cfg.task_kwargs.get("population", 1))
    frame["replicate"] = frame["seed"] * population + frame["member"]
    for key, value in meta.items():
        frame[key] = value
    return frame


# ----------------------------------------------------------------------------- figure job lists
def learning_jobs(fidelity: str) -> list[Job]:
    f = FIDELITY[fidelity]
    match = {"task": MATCH_TASK, "log_points": MATCH_LOG_POINTS} if f.get("learning_task") == "match" else {}
    return [j for m in f["learning_methods"]
            for j in run_jobs(fidelity, m, H=f["learning_H"], steps=f["learning_steps"], seeds=f["learning_seeds"],
                              **match)]


def scaling_jobs(fidelity: str) -> list[Job]:
    f = FIDELITY[fidelity]
    jobs = []
    for m in f["scaling_methods"]:
        for H in f["scaling_H"]:
            jobs += run_jobs(fidelity, m, H=H, steps=f["scaling_steps"][H])
        for V in f["scaling_V"]:
            H = f["scaling_V_H"]
            jobs += run_jobs(fidelity, m, H=H, V=V, steps=f["scaling_steps"][H])
    return jobs  # the H sweep is V = 2, the V sweep H = scaling_V_H; duplicates are one job


def friction_jobs(fidelity: str) -> list[Job]:
    f = FIDELITY[fidelity]
    jobs = []
    for panel, strengths in f["strengths"].items():
        methods = f["friction_methods"] + tuple(f["friction_extra"].get(panel, ()))
        for m in methods:
            for s in strengths:
                # strength 0 is the friction-free run: the same job (and result) as reversal-learning's
                meta = {"panel": panel, "strength": s} if s else {}
                jobs += run_jobs(fidelity, m, H=f["H"], steps=f["friction_steps"], settings=friction_settings(panel, s),
                                 **meta)
    return jobs


def all_friction_jobs(fidelity: str) -> list[Job]:
    f = FIDELITY[fidelity]
    settings = combine([friction_settings(p, s) for p, s in f["all_strengths"].items()])
    return [j for m in f["all_methods"] for H in f["all_H"]
            for j in run_jobs(fidelity, m, H=H, steps=f["all_steps"][H], settings=settings, seeds=f.get("all_seeds"))]


def kondo_jobs(fidelity: str) -> list[Job]:
    f = FIDELITY[fidelity]
    jobs = []
    for priority, pcts in (("delight", f["kondo_pcts"]), ("uniform", f["kondo_controls"])):
        for pct in pcts:
            spec = {"estimator": "kondo", "estimator_kwargs": {"pct": pct, "priority": priority}}
            jobs += run_jobs(fidelity, f"Kondo {priority} {pct:.0%}", H=f["H"], steps=f["steps"], spec=spec,
                             task={"backward": "screened"}, pct=pct, priority=priority)
    if f["kondo_dg"]:
        jobs += run_jobs(fidelity, "DG", H=f["H"], steps=f["steps"], pct=1.0, priority="DG")
    jobs.append(Job("simulations.sequences:kondo_compute",
                    {"H": f["timing_H"], "pcts": list(f["timing_pcts"]), "reps": f["timing_reps"]}, "compute"))
    return jobs


# ----------------------------------------------------------------------------- reference match
#: the reference code's curves (google-deepmind/egg via plugyawn/egg; provenance in data/README.md)
REFERENCE_DATA = ROOT / "simulations" / "data" / "egg_reversal_h10.csv"
#: reference loss name → our method label (its "reinforce" is PPO with clip 10⁹: our PG)
REFERENCE_METHODS = {"dg": "DG", "reinforce": "PG"}
#: the launcher's evaluation: learner reward = mean reward of a fresh 10 × 10 batch of the current learner
MATCH_TASK = {"eval_mode": "sampled", "eval_prompts": 10, "eval_samples": 10}
MATCH_REWARD = 0.95
MATCH_LOG_POINTS = 60


def reference_curves(path: str | Path = REFERENCE_DATA) -> pd.DataFrame:
    """The reference's learner-reward curves: one row per (method, seed, step) with columns
    ``method`` ('PG' | 'DG'), ``seed``, ``step``, ``reward`` (training batch), ``learner_reward``."""
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
    if not frame["learner_reward"].between(0, 1).all():
        raise ValueError(f"reference data {path.name}: learner_reward must lie in [0, 1]")
    frame["method"] = frame["method"].map(REFERENCE_METHODS)
    return frame.sort_values(["method", "seed", "step"], ignore_index=True)


def steps_to_reward(frame: pd.DataFrame, reward: str, threshold: float = MATCH_REWARD) -> np.ndarray:
    """Per seed (``replicate`` or ``seed`` column): the first step its ``reward`` curve reaches
    ``threshold`` (``steps_to_error`` on 1 − reward; the last step where it never does)."""
    seed = "replicate" if "replicate" in frame.columns else "seed"
    table = frame.pivot(index=seed, columns="step", values=reward)
    steps = table.columns.to_numpy()
    return steps_to_error(steps, 1 - table.to_numpy(), 1 - threshold, cap=int(steps.max()))


def match_jobs(fidelity: str) -> list[Job]:
    """The sandbox at the reference launcher's config: H = 10, V = 2, per-position reward, 10 × 10
    learner-reward evaluation; the fidelity's methods (DG at quick, DG and PG at full)."""
    f = FIDELITY[fidelity]
    seeds = f.get("match_seeds_by_method", {})
    return [j for m in f["match_methods"]
            for j in run_jobs(fidelity, m, H=10, steps=f["match_steps"], task=MATCH_TASK,
                              seeds=seeds.get(m, f["match_seeds"]), log_points=MATCH_LOG_POINTS)]


# ----------------------------------------------------------------------------- Kondo compute
def kondo_compute(H: int = 10, pcts: tuple = (0.03, 0.1, 0.3, 1.0), reps: int = 20, seed: int = 0) -> pd.DataFrame:
    """Cost of one learner update (scores, loss, backward) with Kondo screening vs the
    unscreened estimator on the same batch (reversal H, the spec model, 10 × 10 rows):
    FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and attention,
    forward and backward), the fraction of rows and tokens that ran the backward pass, and the
    median wall time over ``reps`` repetitions (single thread)."""
    from torch.utils.flop_counter import FlopCounterMode

    with intra_op_threads(1):
        tasks = {mode: make_task("reverse_copy", H=H, backward=mode) for mode in ("full", "screened")}
        params = [p.requires_grad_(True) for p in tasks["full"].init_params(derived_generator(seed, "init"))]
        # a partly trained policy would do; a fresh one has the same row structure
        rollout = collect(tasks["full"], [p.detach() for p in params], 0, derived_generator(seed, "rollout"), seed)
        advantage = make_advantage("group_mean")
        rows = []
        for pct in pcts:
            est = make_estimator("kondo", pct=pct)
            for mode, task in tasks.items():
                def update(task=task, est=est):
                    terms = learner_terms(task, params, rollout, advantage, derived_generator(seed, "est"), False)
                    out = task.objective(est, terms, rollout, params)
                    torch.autograd.grad(out.loss, params)
                    return out

                with FlopCounterMode(display=False) as counter:
                    out = update()
                times = []
                for _ in range(reps):
                    start = time.perf_counter()
                    update()
                    times.append(time.perf_counter() - start)
                rows.append({"pct": pct, "mode": mode, "flops": counter.get_total_flops(),
                             "seconds": float(np.median(times)),
                             "kept_tokens": float(out.metrics["kept_frac"].mean()),
                             "kept_rows": float(out.metrics["kept_rows_frac"].mean()),
                             "backward_rows": float(out.metrics["backward_rows_frac"].mean())
                             if "backward_rows_frac" in out.metrics else 1.0})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- analysis helpers
def curves(frame: pd.DataFrame, column: str = "error") -> tuple[np.ndarray, np.ndarray]:
    """(steps, values [n_replicates, n_steps]) of one configuration, rows sorted by replicate; a
    diverged replicate keeps its NaN."""
    table = frame.pivot(index="replicate", columns="step", values=column).sort_index()
    return table.columns.to_numpy(), table.to_numpy()


def final(frame: pd.DataFrame, column: str = "error", last: int = 1) -> pd.Series:
    """Per replicate: the mean of ``column`` over the last ``last`` logged steps; NaN for a replicate
    that diverged (claims score it as the metric's worst value)."""
    steps = np.sort(frame["step"].unique())[-last:]
    return seed_mean(frame[frame["step"].isin(steps)], column, ["replicate"])


def steps_to_error(steps: np.ndarray, errors: np.ndarray, threshold: float, cap: int) -> np.ndarray:
    """First step at which each replicate's error curve reaches ``threshold`` (log-linear
    interpolation between logged steps); ``cap`` (censored) where it never does."""
    out = np.full(errors.shape[0], float(cap))
    log_steps = np.log(np.maximum(steps, 1))
    for i, curve in enumerate(errors):
        hit = np.nonzero(curve <= threshold)[0]
        if hit.size == 0:
            continue
        j = hit[0]
        if j == 0:
            out[i] = max(steps[0], 1)
            continue
        e0, e1 = curve[j - 1], curve[j]
        w = 1.0 if e0 == e1 else (e0 - threshold) / (e0 - e1)
        out[i] = math.exp(log_steps[j - 1] + w * (log_steps[j] - log_steps[j - 1]))
    return out


@dataclass(frozen=True)
class PowerLaw:
    """steps ≈ c·x^α fitted by least squares in log-log, with a bootstrap CI of α over replicates."""

    exponent: float
    low: float
    high: float
    prefactor: float
    samples: np.ndarray  # bootstrap exponents (same resampling indices across methods when paired)


def fit_power_law(x: np.ndarray, steps: np.ndarray, n_boot: int = 2000, seed: int = 0,
                  confidence: float = 0.95) -> PowerLaw:
    """``x`` [n_x], ``steps`` [n_x, n_replicates]: regress log steps on log x (scipy.stats.linregress)
    over every (x, replicate) point; the bootstrap resamples replicates independently at every x."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    steps = np.asarray(steps, dtype=float)
    lx = np.repeat(np.log(x), steps.shape[1])
    fit = stats.linregress(lx, np.log(steps).ravel())
    rng = np.random.default_rng(seed)
    n = steps.shape[1]
    boot = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, n, size=steps.shape)
        sample = np.take_along_axis(steps, idx, axis=1)
        boot[b] = stats.linregress(lx, np.log(sample).ravel()).slope
    lo, hi = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return PowerLaw(float(fit.slope), float(lo), float(hi), float(math.exp(fit.intercept)), boot)


# ----------------------------------------------------------------------------- figures
register_figure(Figure("reversal-learning", "sequences", "Token reversal: error vs step for PG, PPO, PMPO, DG",
                       learning_jobs, "notebooks/reversal_learning.py"))
register_figure(Figure("reversal-scaling", "sequences", "Token reversal: steps to a fixed error vs H and V",
                       scaling_jobs, "notebooks/reversal_scaling.py"))
register_figure(Figure("frictions", "sequences", "Final error vs friction strength, one panel per friction",
                       friction_jobs, "notebooks/frictions.py"))
register_figure(Figure("all-frictions", "sequences", "All four frictions at once: error vs step, longest H solved",
                       all_friction_jobs, "notebooks/all_frictions.py"))
register_figure(Figure("reference-match", "sequences",
                       "The sandbox vs the reference code (egg): learner reward vs step, H = 10",
                       match_jobs, "notebooks/reference_match.py"))
register_figure(Figure("kondo", "sequences", "Kondo screening: error vs backward-pass compute",
                       kondo_jobs, "notebooks/kondo.py"))


__all__ = ["FIDELITY", "METHODS", "PANELS", "REFERENCE_DATA", "TASK", "PowerLaw", "combine", "curves", "final",
           "fit_power_law", "friction_settings", "kondo_compute", "match_jobs", "reference_curves", "run_jobs",
           "steps_to_error", "steps_to_reward", "train_run"]
