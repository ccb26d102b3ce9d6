"""Transformer sequence tasks (shared/spec/figures.md, "Transformer sequence tasks"):
reversal-learning, reversal-scaling, frictions, all-frictions (and, in ``simulations.reference``
and ``simulations.kondo``, reference-match, actor-bug-map and kondo).

Every run is the library's actor-learner loop (``sandbox.runtime.loop.train``) on the
``reverse_copy`` task with the reference model, Adam 3e-4, 10 prompts × 10 samples per step, the
group-mean baseline and the reference launcher's reward (the fraction of positions correct). At
paper and full fidelity every seed is its own job (population 1, run in parallel processes); at
quick fidelity the seeds of a configuration run as one population (one batched job). Jobs run
single-threaded (the model is tiny: one intra-op thread is faster, and immune to OpenMP
spin-waits on a busy machine).

Methods: the one method table (``sandbox.scoring.recipes.RECIPES``): PG = the reference's
"reinforce" (token-level IS with the recorded μ); REINFORCE (no ratio); PPO (clip 0.2, π_prox = μ);
PMPO (α = ½); IS-PG (exact sequence IS with the reported μ); DG (η = 1, λ = 10⁻⁶); VCPO = sequence
TIS (C = 8) + the min-variance baseline + the ESS-scaled step; GAC = PPO + gradient-alignment
control against the raw gradient.

Each figure has a *plan*: (tags, jobs) pairs saying what each group of runs is (a panel and a
strength, a configuration); ``simulations.results`` adds the tags as columns, and a run two panels
share is one job. Budgets are set against the papers' (``PAPER_BUDGETS``) and every footer says
which fraction of them a figure ran.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sandbox.analysis.stability import seed_mean
from sandbox.frictions.panels import PANELS as LIBRARY_PANELS
from sandbox.frictions.panels import panel_settings
from sandbox.jobs.sweep import Job, intra_op_threads
from sandbox.methods import method
from sandbox.runtime.config import RunConfig
from simulations import Figure, Plan, register_figure

METHODS: dict[str, dict] = {m: method(m) for m in ("PG", "REINFORCE", "PPO", "PMPO", "IS-PG", "DG", "VCPO", "GAC")}

#: the reference launcher's task (egg experiments/dpg/run.py): reward = fraction of positions correct
#: (κ = 1); at paper and full fidelity every run also logs P1's sequence error, exactly
#: (``SequenceEnvironment.sequence_error``; the fidelity's ``seq_error``)
TASK = {"match": "per_position"}

#: the four friction panels: (label, what a strength is; the library's ``sandbox.frictions.panels``
#: says how it enters the run config)
PANELS = {name: LIBRARY_PANELS[name].axis for name in ("staleness", "actor bug", "reward corruption", "rare discovery")}

#: the papers' budgets, as far as the text available offline says (simulations/data/PUBLISHED.md):
#: P1's reversal K = 1,000 (a third-party summary; K = learner steps in the reference launcher);
#: P2's friction and scaling figures K = 10,000 (the same summary); P1-F9's budgets are not stated
PAPER_BUDGETS = {"reversal-learning": 1000, "reference-match": 1000, "frictions": 10_000, "all-frictions": 10_000,
                 "actor-bug-map": None, "reversal-scaling": None, "kondo": None}

_EVAL = {"eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10}
FIDELITY = {
    "quick": {
        "seeds": 4, "batched_seeds": True, "eval": {"eval_mode": "exact"}, "log_points": 30,
        "large_eval": {"eval_mode": "sampled", "eval_prompts": 20, "eval_samples": 10}, "large_log_points": 15,
        "H": 2, "steps": 150, "seq_error": False,
        "learning_H": 10, "learning_steps": 150, "learning_seeds": 5, "learning_methods": ("PG", "PMPO", "DG"),
        "scaling_H": (1, 2, 3), "scaling_V": (), "scaling_V_H": 2, "scaling_methods": ("PG", "DG"),
        "scaling_steps": 150, "scaling_seeds": 4, "threshold": 0.3,
        "friction_methods": ("PG", "DG"), "friction_extra": {}, "friction_steps": 150, "friction_seeds": 4,
        "strengths": {"staleness": (0, 16), "actor bug": (0, 0.3), "reward corruption": (0, 0.3),
                      "rare discovery": (0, 0.05)},
        "all_H": (10,), "all_methods": ("PG", "DG"), "all_steps": 200, "all_seeds": 5,
        "all_strengths": {"staleness": 4, "actor bug": 0.1, "reward corruption": 0.1, "rare discovery": 0.02},
        "solved": 0.2,
        "kondo_pcts": (0.1, 0.3, 1.0), "kondo_controls": (0.3,), "kondo_dg": False, "timing_H": 10, "timing_reps": 5,
        "timing_pcts": (0.03, 0.1, 0.3, 1.0),
        "match_seeds": 5, "match_steps": {"clean": 320}, "match_methods": ("DG",), "match_configs": ("clean",),
        "match_log_points": 60,
        "map_H": 2, "map_p_bug": (0.1, 0.3), "map_penalty": (0.0, -1.0), "map_steps": 150, "map_seeds": 4,
    },
    # the papers' H = 10, V = 2 everywhere, pruned to fit a few hours on 2 cores: every H = 10 run
    # evaluates 100 × 10 answers on 60 logged steps, so that the runs two figures share are one job
    # (reference-match's clean PG and DG are reversal-learning's; its friction runs are the
    # frictions figure's and the actor-bug map's at the same strengths). 8 seeds where claims are
    # decided by the exact sign-flip test (6 is its least), 10 and 20 where a curve is compared with
    # the reference code
    "paper": {
        "seeds": 8, "batched_seeds": False, "eval": _EVAL, "log_points": 60, "H": 10, "steps": 600, "seq_error": True,
        "large_eval": _EVAL, "large_log_points": 60,
        "learning_H": 10, "learning_steps": 1000, "learning_seeds": 10, "learning_methods": ("PG", "PMPO", "DG"),
        "scaling_H": (2, 4, 6, 8, 10), "scaling_V": (3, 4), "scaling_V_H": 4, "scaling_methods": ("PG", "DG"),
        "scaling_steps": 1000, "scaling_seeds": 8, "threshold": 0.3,
        "friction_methods": ("PG", "PMPO", "DG"), "friction_extra": {"staleness": ("VCPO", "GAC")},
        "friction_steps": 600, "friction_seeds": 8,
        "strengths": {"staleness": (0, 4, 16), "actor bug": (0, 0.1, 0.3),
                      "reward corruption": (0, 0.1, 0.3), "rare discovery": (0, 0.01, 0.03)},
        "all_H": (6, 8, 10), "all_methods": ("PG", "PPO", "PMPO", "DG"), "all_steps": 800, "all_seeds": 8,
        "all_strengths": {"staleness": 4, "actor bug": 0.1, "reward corruption": 0.1, "rare discovery": 0.02},
        "solved": 0.2,
        "kondo_pcts": (0.03, 0.1, 0.3, 1.0), "kondo_controls": (0.1, 0.3), "kondo_dg": False, "timing_H": 10,
        "timing_reps": 20, "timing_pcts": (0.01, 0.03, 0.1, 0.3, 1.0),
        "match_seeds": 20, "match_seeds_by_method": {"DG": 10}, "match_methods": ("DG", "PG"),
        "match_configs": ("clean", "actor-bug", "reward-corruption", "rare-discovery", "staleness-16", "all-four"),
        "match_steps": {"clean": 1000, "actor-bug": 600, "reward-corruption": 600, "rare-discovery": 600,
                        "staleness-16": 600, "all-four": 600},
        "match_log_points": 60, "match_confirm": True,
        "map_H": 10, "map_p_bug": (0.03, 0.1, 0.3), "map_penalty": (0.0, -0.5, -1.0), "map_steps": 600, "map_seeds": 8,
    },
}
# full: the complete grid at the papers' budgets, for a cluster or a GPU (issue 24)
FIDELITY["full"] = {
    **FIDELITY["paper"], "seeds": 10, "learning_steps": 5000, "learning_methods": ("PG", "PPO", "PMPO", "DG"),
    "scaling_V": (2, 3, 4, 6, 8), "scaling_methods": ("PG", "PPO", "PMPO", "DG"), "scaling_steps": 10_000,
    "scaling_seeds": 10, "friction_methods": ("PG", "PPO", "PMPO", "IS-PG", "DG"), "friction_steps": 10_000,
    "friction_seeds": 10,
    "strengths": {"staleness": (0, 4, 16, 64), "actor bug": (0, 0.1, 0.3, 0.5),
                  "reward corruption": (0, 0.1, 0.3, 0.5), "rare discovery": (0, 0.01, 0.03, 0.1)},
    "all_H": (4, 6, 8, 10, 12), "all_methods": ("PG", "PPO", "PMPO", "IS-PG", "DG"), "all_steps": 10_000,
    "all_seeds": 10, "kondo_pcts": (0.01, 0.03, 0.1, 0.3, 1.0), "kondo_dg": True, "timing_reps": 50,
    "map_seeds": 10,
}


# ----------------------------------------------------------------------------- run configs and jobs
def run_jobs(fidelity: str, method: str, *, H: int, steps: int, V: int = 2, settings: dict | None = None,
             task: dict | None = None, spec: dict | None = None, seeds: int | None = None,
             log_points: int | None = None) -> list[Job]:
    """The jobs of one configuration: one population job (quick) or one job per seed (paper, full).
    ``spec`` (RunConfig fields of the method) defaults to ``METHODS[method]``; ``seeds`` and
    ``log_points`` to the fidelity's; ``task`` overrides the task fields (``TASK``, evaluation).
    A job's identity is its config alone (and the method's label): figures that run the same
    config share the job."""
    f = FIDELITY[fidelity]
    seeds = seeds or f["seeds"]
    evaluation = dict(f["eval"])
    if evaluation.get("eval_mode") == "exact" and V ** (2 * H) > 1 << 14:  # too many pairs to enumerate
        evaluation, log_points = f["large_eval"], log_points or f["large_log_points"]
    task_kwargs = {"H": H, "V": V, **TASK, "seq_error": f["seq_error"], **evaluation, **(task or {})}
    spec = METHODS[method] if spec is None else spec
    base = RunConfig(task="reverse_copy", task_kwargs={}, lr=3e-4, steps=steps,
                     log_points=log_points or f["log_points"], label=method, **spec, **(settings or {}))
    meta = {"method": method, "H": H, "V": V}
    if f["batched_seeds"]:
        return [_job(base.replace(task_kwargs={**task_kwargs, "population": seeds}, seed=0), meta)]
    return [_job(base.replace(task_kwargs={**task_kwargs, "population": 1}, seed=s), meta) for s in range(seeds)]


def _job(config: RunConfig, meta: dict) -> Job:
    params = config.to_dict()
    params.pop("label")
    return Job("simulations.sequences:train_run", {"config": params, "meta": meta}, config.label)


def train_run(config: dict, meta: dict) -> pd.DataFrame:
    """One training run, single-threaded; adds ``replicate`` (the seed's id across batched and
    separate runs: seed · population + member) and the ``meta`` columns (method, H, V)."""
    from sandbox.runtime.loop import train

    cfg = RunConfig.from_dict(config)
    with intra_op_threads(1):
        frame = train(cfg)
    population = int(cfg.task_kwargs.get("population", 1))
    frame["replicate"] = frame["seed"] * population + frame["member"]
    for key, value in meta.items():
        frame[key] = value
    return frame


# ----------------------------------------------------------------------------- figure plans
def learning_plan(fidelity: str) -> Plan:
    f = FIDELITY[fidelity]
    return [({}, run_jobs(fidelity, m, H=f["learning_H"], steps=f["learning_steps"], seeds=f["learning_seeds"]))
            for m in f["learning_methods"]]


def scaling_plan(fidelity: str) -> Plan:
    """P1-F9: every H at V = 2 and every V at H = scaling_V_H, one fixed budget for all."""
    f = FIDELITY[fidelity]
    plan = []
    for m in f["scaling_methods"]:
        for H in f["scaling_H"]:
            plan.append(({"axis": "H"}, run_jobs(fidelity, m, H=H, steps=f["scaling_steps"], seeds=f["scaling_seeds"])))
        for V in (2, *f["scaling_V"]) if f["scaling_V"] else ():
            H = f["scaling_V_H"]
            plan.append(({"axis": "V"}, run_jobs(fidelity, m, H=H, V=V, steps=f["scaling_steps"],
                                                 seeds=f["scaling_seeds"])))
    return plan


def friction_plan(fidelity: str) -> Plan:
    """Each panel × method × strength; strength 0 is the one friction-free run every panel shares."""
    f = FIDELITY[fidelity]
    plan = []
    for panel, strengths in f["strengths"].items():
        for m in f["friction_methods"] + tuple(f["friction_extra"].get(panel, ())):
            for s in strengths:
                plan.append(({"panel": panel, "strength": s},
                             run_jobs(fidelity, m, H=f["H"], steps=f["friction_steps"], seeds=f["friction_seeds"],
                                      settings=panel_settings([(panel, s)]))))
    return plan


def all_friction_plan(fidelity: str) -> Plan:
    f = FIDELITY[fidelity]
    settings = panel_settings(f["all_strengths"].items())
    return [({}, run_jobs(fidelity, m, H=H, steps=f["all_steps"], settings=settings, seeds=f["all_seeds"]))
            for m in f["all_methods"] for H in f["all_H"]]


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


def cumulative(frame: pd.DataFrame, column: str = "error") -> pd.Series:
    """Per replicate: the mean of ``column`` over the whole run — the trapezoid area under its
    curve over the logged steps, divided by the budget (P1's cumulative error); NaN if diverged."""
    out = {}
    for key, run in frame.sort_values("step").groupby("replicate"):
        steps, values = run["step"].to_numpy(float), run[column].to_numpy(float)
        out[key] = np.nan if np.isnan(values).any() else float(np.trapezoid(values, steps) / steps[-1])
    return pd.Series(out, name=column).sort_index()


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


def log_slopes(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per seed (columns of ``values [n_x, n_seeds]``): the least-squares slope of log value on
    log x — how fast that seed's error grows with the complexity x. NaN where a value is NaN."""
    lx = np.log(np.asarray(x, dtype=float))
    ly = np.log(np.asarray(values, dtype=float))
    lx = lx - lx.mean()
    slopes = (lx[:, None] * (ly - ly.mean(0))).sum(0) / (lx**2).sum()
    return np.where(np.isnan(ly).any(0), np.nan, slopes)


def budget_note(figure: str, steps: int, seeds: int | str) -> str:
    """'600 of the paper's 10,000 steps, 8 seeds' (or 'the paper's budget is not stated')."""
    paper = PAPER_BUDGETS.get(figure)
    budget = f"{steps:,} of the paper's {paper:,} steps" if paper else f"{steps:,} steps (the paper's budget is not stated)"
    return f"{budget}, {seeds} seeds"


# ----------------------------------------------------------------------------- figures
register_figure(Figure("reversal-learning", "sequences", "Token reversal: error vs step for PG, PMPO, DG",
                       None, "notebooks/reversal_learning.py", plan=learning_plan))
register_figure(Figure("reversal-scaling", "sequences",
                       "Token reversal: final and cumulative error vs H and V at a fixed budget (P1-F9)",
                       None, "notebooks/reversal_scaling.py", plan=scaling_plan))
register_figure(Figure("frictions", "sequences", "Final error vs friction strength, one panel per friction",
                       None, "notebooks/frictions.py", plan=friction_plan))
register_figure(Figure("all-frictions", "sequences", "All four frictions at once: error vs step, longest H solved",
                       None, "notebooks/all_frictions.py", plan=all_friction_plan))


__all__ = ["FIDELITY", "METHODS", "PANELS", "PAPER_BUDGETS", "TASK", "budget_note", "cumulative", "curves",
           "final", "log_slopes", "run_jobs", "steps_to_error", "train_run"]
