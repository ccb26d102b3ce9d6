"""``sandbox reproduce``: run the figures' sweeps, execute their notebooks, print the claims.

Each notebook is a jupytext percent-format ``.py``; it is executed with nbclient in a fresh
kernel with ``SANDBOX_FIDELITY``, ``SANDBOX_RESULTS``, ``SANDBOX_FIGURES`` and ``SANDBOX_CLAIMS``
set, writes its PNG and PDF, and records its claims. The executed ``.ipynb`` is saved beside the
source (its jupytext pair).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox.analysis.claims import Claim, format_claims, load_claims
from sandbox.analysis.store import ResultsStore
from sandbox.runtime.sweep import Job, run_sweep

log = logging.getLogger(__name__)

#: base seed K moves every seed by K·SEED_STRIDE: the seed sets of different base seeds are disjoint
SEED_STRIDE = 1000


def base_seed_from_env() -> int:
    """``$SANDBOX_BASE_SEED`` (default 0), the base seed a notebook's ``results()`` applies."""
    value = os.environ.get("SANDBOX_BASE_SEED", "0")
    if not value.isdigit():
        raise ValueError(f"SANDBOX_BASE_SEED must be an integer ≥ 0, got {value!r}")
    return int(value)


def _shift(params, offset: int):
    if isinstance(params, dict):
        return {k: v + offset if k == "seed" and isinstance(v, int) else _shift(v, offset) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return type(params)(_shift(v, offset) for v in params)
    return params


def _has_seed(params) -> bool:
    if isinstance(params, dict):
        return "seed" in params or any(_has_seed(v) for v in params.values())
    return isinstance(params, (list, tuple)) and any(_has_seed(v) for v in params)


def offset_seeds(jobs: list[Job], base_seed: int) -> list[Job]:
    """The jobs with every seed moved by ``base_seed``·SEED_STRIDE: each ``seed`` entry of their
    parameters (nested run configs too) or, for a job function with a ``seed`` argument it is not
    given, that argument (its default + the offset). Base seed 0 returns the jobs unchanged."""
    if not isinstance(base_seed, int) or base_seed < 0:
        raise ValueError(f"base_seed must be an integer ≥ 0, got {base_seed!r}")
    if base_seed == 0:
        return list(jobs)
    offset = base_seed * SEED_STRIDE
    out = []
    for job in jobs:
        params = copy.deepcopy(job.params)
        if _has_seed(params):
            params = _shift(params, offset)
        else:
            arg = inspect.signature(job.resolve()).parameters.get("seed")
            if arg is not None and isinstance(arg.default, int):
                params["seed"] = arg.default + offset
        out.append(replace(job, params=params))
    return out


@dataclass
class FigureOutcome:
    name: str
    claims: list[Claim] = field(default_factory=list)
    error: str | None = None
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """No error, at least one claim recorded, and no asserted claim failed (a figure whose claims
        a fidelity cannot settle may record them all as reported)."""
        return self.error is None and bool(self.claims) and all(c.passed is not False for c in self.claims)

    @property
    def reported_only(self) -> bool:
        return bool(self.claims) and all(c.passed is None for c in self.claims)


def execute_notebook(source: Path, output: Path | None, env: dict[str, str], timeout: int = 3600) -> None:
    """Execute a jupytext ``.py`` notebook in a fresh kernel whose environment includes ``env``."""
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(source)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(source.parent.parent)}})
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            jupytext.write(notebook, output, fmt="ipynb")


#: the module that registers figures (``select(names)``, ``FIDELITIES``): the one hook through which the
#: library reaches the experiment families, which live outside it (``simulations/``)
FIGURES_MODULE = os.environ.get("SANDBOX_FIGURES", "simulations")


def figures():
    """The figure registry module (``$SANDBOX_FIGURES``, default ``simulations``)."""
    try:
        return importlib.import_module(FIGURES_MODULE)
    except ModuleNotFoundError as err:
        if err.name != FIGURES_MODULE:
            raise
        raise ValueError(f"no figure module {FIGURES_MODULE!r}: run from a checkout of the repository (its "
                         "simulations/ package) or set SANDBOX_FIGURES to a module that registers figures") from None


def reproduce(names=None, fidelity: str = "quick", results_dir: str | os.PathLike = "results",
              figures_dir: str | os.PathLike = "paper_figures", notebooks_dir: str | os.PathLike | None = None,
              workers: int | None = None, backend: str = "local", progress: bool = True,
              base_seed: int = 0) -> list[FigureOutcome]:
    """Run the selected figures end to end; never stops at the first failure. ``base_seed`` K
    moves every job's seeds by K·SEED_STRIDE (``offset_seeds``): an independent replication."""
    registry = figures()
    if fidelity not in registry.FIDELITIES:
        raise ValueError(f"fidelity must be one of {list(registry.FIDELITIES)}, got {fidelity!r}")
    offset_seeds([], base_seed)  # validates it
    chosen = registry.select(names)
    results_dir, figures_dir = Path(results_dir), Path(figures_dir)
    store = ResultsStore(results_dir)
    outcomes = []
    for figure in chosen:
        start = time.perf_counter()
        outcome = FigureOutcome(figure.name)
        suffix = f".seed{base_seed}" if base_seed else ""
        claims_path = results_dir / "claims" / f"{figure.name}.{fidelity}{suffix}.json"
        try:
            report = run_sweep(offset_seeds(figure.jobs(fidelity), base_seed), store, backend=backend, workers=workers,
                               progress=progress, desc=figure.name)
            if not report.ok:
                raise RuntimeError(f"{len(report.failed)} job(s) failed: " + next(iter(report.failed.values())))
            env = {"SANDBOX_FIDELITY": fidelity, "SANDBOX_RESULTS": str(results_dir.resolve()),
                   "SANDBOX_FIGURES": str(figures_dir.resolve()), "SANDBOX_CLAIMS": str(claims_path.resolve()),
                   "SANDBOX_WORKERS": str(workers or 1), "SANDBOX_BASE_SEED": str(base_seed)}
            source = figure.notebook_path()
            output = (Path(notebooks_dir) / f"{source.stem}.ipynb") if notebooks_dir else source.with_suffix(".ipynb")
            execute_notebook(source, output, env)
        except Exception as err:  # report and go on to the next figure
            outcome.error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
            log.error("figure %s failed: %s", figure.name, err)
        outcome.claims = load_claims(claims_path)
        outcome.files = sorted(figures_dir.glob(f"{figure.name}.*"))
        outcome.seconds = time.perf_counter() - start
        outcomes.append(outcome)
    return outcomes


def summary(outcomes: list[FigureOutcome]) -> str:
    lines = [format_claims([c for o in outcomes for c in o.claims]), ""]
    for o in outcomes:
        status = ("ok (reported only)" if o.reported_only else "ok") if o.ok else (
            "ERROR " + o.error if o.error else "claims failed")
        files = ", ".join(p.name for p in o.files) or "no figure written"
        lines.append(f"{o.name:<28} {o.seconds:7.1f}s  {status:<16} {files}")
    asserted = [c for o in outcomes for c in o.claims if c.passed is not None]
    reported = sum(c.passed is None for o in outcomes for c in o.claims)
    lines.append(f"\n{sum(c.passed for c in asserted)}/{len(asserted)} claims passed"
                 f"{f' ({reported} more reported, not asserted)' if reported else ''}; "
                 f"{sum(o.ok for o in outcomes)}/{len(outcomes)} figures ok")
    return "\n".join(lines)
