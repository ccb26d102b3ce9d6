"""frictions-2026: final error vs strength of the three frictions of issue 16 (truncated sampling
reported as the full softmax, partial rollouts, dropping stale rollouts) for REINFORCE, TIS, DPPO,
VESPO and DG on token reversal.

Panels (strength 0 of each is its baseline run):
- **top-p, full report**: the actor samples top-p and reports the full softmax log-prob (vLLM's
  raw log-probs): the reported μ is off by the surviving mass; on-policy otherwise.
- **partial rollouts**: under a uniform delay d_t ~ U{0..D}, each answer is sampled in k chunks,
  from the version t − d_t up to the newest (AReaL/slime).
- **drop admission**: under the same delay, rows staler than the budget b are dropped (AReaL's
  staleness control); the fraction of prompts that never reach the learner is logged.

Seeds: one batched run per configuration at each seed of ``seeds_at`` (``sandbox reproduce
--base-seed K`` moves them by K·1000, the one seed-offset mechanism). The asserted claims
(``ASSERTED``, the one place they are stated) were chosen from runs at seeds 0, 1000 and 2000
(quick and full, 16 and 32 seeds); the paper tier confirms them at seeds 3000 and 4000, never used
to choose them, and asserts each at both.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sandbox.analysis.claim_audit import same_vectors
from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.stats import t_interval
from sandbox.core.validation import check_choice
from sandbox.frictions import DelaySchedule
from sandbox.frictions.panels import PANELS as LIBRARY_PANELS
from sandbox.frictions.panels import panel_settings
from sandbox.jobs.sweep import Job
from sandbox.methods import method as method_fields
from sandbox.runtime.config import RunConfig
from simulations import Figure, register_figure
from simulations.sequences import _job, final

#: the one method table (``sandbox.scoring.recipes``): REINFORCE has no ratio, TIS truncates at C = 2
METHODS: dict[str, dict] = {m: method_fields(m) for m in ("REINFORCE", "TIS", "DPPO", "VESPO", "DG")}
#: the three panels (label → what a strength is); ``sandbox.frictions.panels`` says how it enters the config
PANELS = {name: LIBRARY_PANELS[name].axis for name in ("top-p (full report)", "partial rollouts", "drop admission")}
SLUGS = {"top-p (full report)": "top-p", "partial rollouts": "partial", "drop admission": "drop"}
SMALL = {"width": 16, "heads": 2, "layers": 1, "mlp": 32, "prompts_per_step": 4, "samples_per_prompt": 8}
FIDELITY = {
    "quick": {"H": 2, "V": 2, "seeds": 16, "steps": 80, "lr": 3e-3, "D": 4, "model": SMALL, "log_points": 5,
              "strengths": {"top-p (full report)": (0, 0.3), "partial rollouts": (1, 2), "drop admission": (0, 4)}},
    "full": {"H": 4, "V": 2, "seeds": 32, "steps": 400, "lr": 3e-3, "D": 4, "model": SMALL, "log_points": 10,
             "strengths": {"top-p (full report)": (0, 0.1, 0.2, 0.4), "partial rollouts": (1, 2, 4),
                           "drop admission": (0, 2, 3, 4)}},
}

#: the full grid fits the paper tier, run at two seeds never used to choose the asserted claims
FIDELITY["paper"] = {**FIDELITY["full"], "seeds_at": (3000, 4000)}


def settings(panel: str, strength: float, D: int) -> dict:
    """RunConfig fields of one panel at ``strength`` (its baseline at strength 0, chunks 1); the
    partial-rollout and drop panels run under the uniform delay U{0..D}."""
    check_choice("panel", panel, tuple(PANELS))
    delayed = {} if panel == "top-p (full report)" else {"staleness": {"kind": "uniform", "D": D}}
    return panel_settings([(panel, strength)], delayed)


def setting(panel: str, strength: float, D: int) -> str:
    """A name of the run a (panel, strength) is: the panels' baselines that are one run share it."""
    check_choice("panel", panel, tuple(PANELS))
    if panel == "top-p (full report)":
        return f"top_p={1 - strength:g}" if strength else "on-policy"
    if panel == "partial rollouts" and strength > 1:
        return f"U{{0..{D}}}, chunks={int(strength)}"
    if panel == "drop admission" and strength:
        return f"U{{0..{D}}}, drop budget={D - int(strength)}"
    return f"U{{0..{D}}}"


def jobs(fidelity: str) -> list[Job]:
    """One batched-population job per (method, setting): the baselines of the two delayed panels
    are the same run, hence one job."""
    check_choice("fidelity", fidelity, tuple(FIDELITY))
    f = FIDELITY[fidelity]
    task = {"H": f["H"], "V": f["V"], "population": f["seeds"], "eval_mode": "exact", **f["model"]}
    out: dict[str, Job] = {}
    for seed in f.get("seeds_at", (0,)):
        for method, spec in METHODS.items():
            for panel, strengths in f["strengths"].items():
                for s in strengths:
                    config = RunConfig(task="reverse_copy", task_kwargs=task, lr=f["lr"], steps=f["steps"],
                                       log_points=f["log_points"], seed=seed, label=method, **spec,
                                       **settings(panel, s, f["D"]))
                    job = _job(config, {"method": method, "setting": setting(panel, s, f["D"])})
                    out.setdefault(job.id, job)
    return list(out.values())


def final_errors(frame: pd.DataFrame, fidelity: str, panel: str, method: str, strength: float,
                 column: str = "error") -> np.ndarray:
    """Final ``column`` per seed of one (panel, method, strength); a diverged seed (NaN) counts as
    its worst value, error 1."""
    name = setting(panel, strength, FIDELITY[fidelity]["D"])
    runs = frame[(frame.method == method) & (frame.setting == name)]
    if runs.empty:
        raise ValueError(f"no runs of {method} at {name!r} in the frame")
    return final(runs, column).to_numpy()  # a diverged seed stays NaN: claims score it as the worst


# ----------------------------------------------------------------------------- claims
#: the claims that held at base seeds 0, 1000 and 2000 (paired t-intervals; quick: 16 seeds each,
#: full: 32) and are asserted; every other comparison is reported with its interval (INFO). Methods
#: whose runs give identical numbers (on-policy the ratio methods are REINFORCE) are one claim,
#: named with '=': it is asserted when each of its methods' claims is.
SANITY = {"sanity-on-policy-equal", "sanity-dropped-fraction"}
ASSERTED = {
    "quick": SANITY | {"top-p-raises-error-DG", "drop-raises-error-DPPO", "drop-raises-error-VESPO",
                       "drop-raises-error-DG", "dg-below-REINFORCE-partial"},
    "full": SANITY | {f"top-p-raises-error-{m}" for m in METHODS} | {"drop-raises-error-DG",
                                                                    "dg-below-REINFORCE-partial",
                                                                    "dg-below-TIS-partial"},
}
ASSERTED["paper"] = ASSERTED["full"]


def _groups(values: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[list[str]]:
    """Methods grouped by one measurement (one claim), in table order: their paired differences
    a − b are identical, NaN (diverged) included, or one measurement by ``claim_audit.same_vectors``
    (on-policy, TIS, DPPO and VESPO are REINFORCE to within rounding)."""
    def one(x: np.ndarray, y: np.ndarray) -> bool:  # NaN (diverged) at the same seeds, the rest one measurement
        nan = np.isnan(x)
        return np.array_equal(x, y, equal_nan=True) or (np.array_equal(nan, np.isnan(y))
                                                         and bool(same_vectors(x[~nan], y[~nan])))

    groups: list[list[str]] = []
    for m, (a, b) in values.items():
        same = next((g for g in groups if one(values[g[0]][0] - values[g[0]][1], a - b)), None)
        (same.append(m) if same is not None else groups.append([m]))
    return groups


def _gap(a: np.ndarray, b: np.ndarray) -> float:
    """max |a − b| over seeds; a seed diverged (NaN) in one run but not the other is an infinite gap."""
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return math.inf
    d = np.abs(a - b)[~np.isnan(a)]
    return float(d.max()) if d.size else 0.0


def claims(book: ClaimBook, frame: pd.DataFrame, fidelity: str) -> pd.DataFrame:
    """Record the figure's claims in ``book`` (asserted: ``ASSERTED[fidelity]``; the rest reported),
    at every seed set of the fidelity (each claim must hold at each), and return the table of
    paired differences (strongest strength − strength 0, per method and seed set)."""
    check_choice("fidelity", fidelity, tuple(FIDELITY))
    seeds = sorted(frame["seed"].unique())
    rows = []
    for seed in seeds:
        suffix = f"@{seed}" if len(seeds) > 1 else ""
        rows += _claims_at(book, frame[frame["seed"] == seed], fidelity, suffix)
    return pd.DataFrame(rows)


def _claims_at(book: ClaimBook, frame: pd.DataFrame, fidelity: str, suffix: str) -> list[dict]:
    f = FIDELITY[fidelity]
    asserted = ASSERTED[fidelity]

    def compare(names: list[str], template: str, statement: str, a: np.ndarray, b: np.ndarray,
                above: bool = True) -> None:
        """One claim for methods with identical numbers (``template`` names it, '{m}' the methods):
        the paired t-interval of a − b (16–32 seeds) above 0 (or below); a diverged seed (NaN final
        error) scores as the highest error, never dropped."""
        test = book.greater if above else book.less
        claim = test(template.format(m="=".join(names)) + suffix, statement, a, b, paired=True, worse="high")
        if not all(template.format(m=m) in asserted for m in names):
            book.report(claim)

    on_policy = {m: final_errors(frame, fidelity, "top-p (full report)", m, 0) for m in METHODS}
    gap = max(_gap(on_policy[m], on_policy["REINFORCE"]) for m in ("TIS", "DPPO", "VESPO"))
    book.exact(f"sanity-on-policy-equal{suffix}", "on-policy, TIS, DPPO and VESPO give REINFORCE's final error "
               "(their ratios are 1)", gap, gap < 1e-6, "max |error − REINFORCE's| over seeds")
    budget = f["D"] - max(f["strengths"]["drop admission"])
    schedule = DelaySchedule("uniform", D=f["D"], admission="drop", budget=budget)
    seed = int(frame["seed"].iloc[0])  # the runs' own seed (``--base-seed K`` moves it by K·1000)
    expected = np.mean([schedule.delay(t, seed) > budget for t in range(f["steps"])])
    logged = final_errors(frame, fidelity, "drop admission", "REINFORCE", max(f["strengths"]["drop admission"]),
                          "prompts_dropped_frac")
    book.close(f"sanity-dropped-fraction{suffix}", f"the logged fraction of prompts never learned from is the "
               f"fraction of steps with d_t > {budget} ({expected:.3f})", logged, expected, 1e-9)
    rows = []
    for panel, strengths in f["strengths"].items():
        top = max(strengths)
        ends = {m: (final_errors(frame, fidelity, panel, m, top), final_errors(frame, fidelity, panel, m, min(strengths)))
                for m in METHODS}
        for group in _groups(ends):
            who = " = ".join(group) + (" (one measurement: their ratios are 1 on-policy)" if len(group) > 1 else "")
            compare(group, f"{SLUGS[panel]}-raises-error-{{m}}", f"{panel} at {PANELS[panel]} = {top}: {who}'s "
                    "final error rises", *ends[group[0]])
        worst = {m: [np.nan_to_num(x, nan=1.0) for x in pair] for m, pair in ends.items()}  # diverged: error 1
        rows += [{"panel": panel, "strength": top, "method": m, "mean_diff": float(np.mean(hi - lo)), "seed": seed}
                 for m, (hi, lo) in worst.items()]
    for panel, strengths in f["strengths"].items():
        top = max(strengths)
        dg = final_errors(frame, fidelity, panel, "DG", top)
        others = {m: (dg, final_errors(frame, fidelity, panel, m, top)) for m in ("REINFORCE", "TIS")}
        for group in _groups(others):
            compare(group, f"dg-below-{{m}}-{SLUGS[panel]}", f"{panel} at {top}: DG's final error is below "
                    f"{' = '.join(group)}'s", *others[group[0]], above=False)
    return rows


register_figure(Figure("frictions-2026", "sequences",
                       "Final error vs strength of truncated sampling, partial rollouts and drop admission",
                       jobs, "notebooks/frictions_2026.py"))

__all__ = ["ASSERTED", "FIDELITY", "METHODS", "PANELS", "claims", "final_errors", "jobs", "setting", "settings",
           "t_interval"]
