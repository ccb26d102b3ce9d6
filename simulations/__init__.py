"""Experiment families: each figure of shared/spec/figures.md is a sweep here plus a notebook.

A ``Figure`` names its jobs for a fidelity ('quick' runs in the test suite, 'full' is what
``sandbox reproduce --fidelity full`` runs) and the jupytext notebook that plots it and asserts
its claims. Notebooks get their results with ``results(name)``, which runs any missing job first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sandbox.analysis.stability import carried_to_budget
from sandbox.core.plugins import entry_points_of
from sandbox.core.validation import check_choice
from sandbox.jobs.pool import import_plugins, plugins_from_env
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, kept_from_env, load_results, run_sweep, unique_jobs

# a notebook kernel or worker started by `sandbox --plugin …` imports the user's plugins too
import_plugins(plugins_from_env())

#: quick: the test suite's; paper: every figure at the papers' settings, pruned to about 16 h of jobs
#: (≈ 8 h on 2 cores; committed to paper_figures/ with CLAIMS.md); full: the complete grid, for a cluster or a GPU
FIDELITIES = ("quick", "paper", "full")
ROOT = Path(__file__).resolve().parents[1]
#: the entry-point group of the modules that register figures (pyproject.toml): this package's
#: families, and any installed distribution's that declares its own module there
FAMILY_GROUP = "sandbox.figures"


#: a figure's plan: (tags, jobs) pairs — what each group of runs is (panel, strength, config …);
#: a job may appear under several tags (a run shared by two panels is one job)
Plan = list[tuple[dict, list[Job]]]


@dataclass(frozen=True)
class Figure:
    """A figure: its jobs at a fidelity (``jobs``, or the jobs of ``plan``, whose tags ``results``
    adds as columns) and the notebook that draws it and asserts its claims."""

    name: str
    group: str  # 'theory' | 'mnist' | 'sequences' | 'llm'
    title: str
    jobs: Callable[[str], list[Job]] | None
    notebook: str  # path relative to the repository root
    plan: Callable[[str], Plan] | None = None
    #: what its committed data file keeps of each job's result, ``figure_data.DataSpec``'s fields as a mapping
    #: (None: all of it); a mapping, since job code must not import that presentation module
    data_spec: dict | None = None

    def __post_init__(self) -> None:
        if (self.jobs is None) == (self.plan is None):
            raise ValueError(f"figure {self.name!r}: give exactly one of jobs and plan")
        if self.jobs is None:
            object.__setattr__(self, "jobs", lambda fidelity: unique_jobs([j for _, js in self.plan(fidelity) for j in js]))

    def notebook_path(self) -> Path:
        return ROOT / self.notebook


def tagged(frame: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """The rows of every (tags, jobs) entry of ``plan``, with its tags as columns (a job under two
    tags appears twice, once with each)."""
    parts = [frame[frame["job_id"].isin({j.id for j in jobs})].assign(**tags) for tags, jobs in plan]
    return pd.concat(parts, ignore_index=True) if parts else frame.iloc[:0]


FIGURES: dict[str, Figure] = {}


def register_figure(figure: Figure) -> Figure:
    if figure.name in FIGURES and FIGURES[figure.name] is not figure:
        raise ValueError(f"figure {figure.name!r} is already registered")
    FIGURES[figure.name] = figure
    return figure


def load_families() -> dict[str, Figure]:
    """Import every figure family — the modules of the ``sandbox.figures`` entry points — and
    return the figures they registered; a family whose module is missing (an optional one left
    out of an install) is skipped, an error inside one propagates."""
    for entry in entry_points_of(FAMILY_GROUP).values():
        try:
            entry.load()
        except ModuleNotFoundError as err:
            if err.name != entry.module:
                raise
    return FIGURES


def select(names: Iterable[str] | None = None) -> list[Figure]:
    """Figures by name or group ('theory', 'mnist', 'sequences', 'llm'); all when empty."""
    figures = load_families()
    names = list(names or [])
    if not names:
        return list(figures.values())
    groups = {f.group for f in figures.values()}
    chosen: list[Figure] = []
    for name in names:
        if name in figures:
            picked = [figures[name]]
        elif name in groups:
            picked = [f for f in figures.values() if f.group == name]
        else:
            raise ValueError(f"unknown figure or group {name!r}; figures: {sorted(figures)}; groups: {sorted(groups)}")
        chosen.extend(f for f in picked if f not in chosen)
    return chosen


def fidelity_from_env() -> str:
    fidelity = os.environ.get("SANDBOX_FIDELITY", "quick")
    check_choice("SANDBOX_FIDELITY", fidelity, FIDELITIES)
    return fidelity


def results(name: str, fidelity: str | None = None, store: ResultsStore | None = None,
            workers: int | None = None, progress: bool = True) -> pd.DataFrame:
    """The results of figure ``name`` at ``fidelity`` (default ``$SANDBOX_FIDELITY``) and base seed
    ``$SANDBOX_BASE_SEED`` (default 0), running missing jobs first (``$SANDBOX_WORKERS`` processes)."""
    from sandbox.jobs.devices import device_from_env, on_device
    from sandbox.jobs.seeds import base_seed_from_env, offset_seeds

    fidelity = fidelity or fidelity_from_env()
    check_choice("fidelity", fidelity, FIDELITIES)
    figure = select([name])[0]
    store = store or ResultsStore(os.environ.get("SANDBOX_RESULTS", ROOT / "results"))
    base = base_seed_from_env()
    jobs = on_device(offset_seeds(figure.jobs(fidelity), base), device_from_env())
    workers = workers or int(os.environ.get("SANDBOX_WORKERS", "1"))
    report = run_sweep(jobs, store, workers=workers, progress=progress, desc=name,
                       accept_stale_code=kept_from_env())  # reproduce's restored committed results
    if not report.ok:
        raise RuntimeError(f"{len(report.failed)} job(s) of {name} failed:\n" + "\n".join(report.failed.values()))
    frame = carried_to_budget(load_results(jobs, store))  # a seed whose job stopped at divergence counts to the end
    if figure.plan is None:
        return frame
    return tagged(frame, [(tags, on_device(offset_seeds(js, base), device_from_env())) for tags, js in figure.plan(fidelity)])


def published() -> dict[tuple[str, str], str]:
    """The papers' statements beside our claims, {(figure, claim-name pattern): text} (CLAIMS.md)."""
    from simulations.paper_statements import published as statements

    return statements()


def audit_rules() -> dict:
    """What the committed claims must pass beyond their tests (``sandbox.analysis.claim_audit``): the
    post-hoc choices confirmed on other seeds, the identities whose consequences are sanity and the
    starts a difference's arms must move from (``simulations.claim_rules.rules``)."""
    from simulations.claim_rules import rules

    return rules()


def fail_causes() -> dict[tuple[str, str], str]:
    """Why a committed paper-tier claim fails, {(figure, claim-name pattern): sentence} (CLAIMS.md)."""
    from simulations.paper_statements import fail_causes as causes

    return causes()


def headlines(results_dir: str | os.PathLike, fidelity: str) -> str:
    """The published-vs-sandbox table of the papers' headline numbers (README, CLAIMS.md)."""
    from simulations.paper_statements import headline_markdown

    return headline_markdown(results_dir, fidelity)
