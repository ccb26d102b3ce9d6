"""``sandbox reproduce``: run the figures' sweeps, execute their notebooks, print the claims.

Each notebook is a jupytext percent-format ``.py``; it is executed with nbclient in a fresh
kernel with ``SANDBOX_FIDELITY``, ``SANDBOX_RESULTS``, ``SANDBOX_FIGURES`` and ``SANDBOX_CLAIMS``
set, writes its PNG and PDF, and records its claims. The executed ``.ipynb`` is saved beside the
source (its jupytext pair).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.analysis.claims import Claim, format_claims, load_claims
from sandbox.analysis.store import ResultsStore
from sandbox.runtime.sweep import run_sweep

log = logging.getLogger(__name__)


@dataclass
class FigureOutcome:
    name: str
    claims: list[Claim] = field(default_factory=list)
    error: str | None = None
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        asserted = [c for c in self.claims if c.passed is not None]
        return self.error is None and bool(asserted) and all(c.passed for c in asserted)


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
              workers: int | None = None, backend: str = "local", progress: bool = True) -> list[FigureOutcome]:
    """Run the selected figures end to end; never stops at the first failure."""
    registry = figures()
    if fidelity not in registry.FIDELITIES:
        raise ValueError(f"fidelity must be one of {list(registry.FIDELITIES)}, got {fidelity!r}")
    chosen = registry.select(names)
    results_dir, figures_dir = Path(results_dir), Path(figures_dir)
    store = ResultsStore(results_dir)
    outcomes = []
    for figure in chosen:
        start = time.perf_counter()
        outcome = FigureOutcome(figure.name)
        claims_path = results_dir / "claims" / f"{figure.name}.{fidelity}.json"
        try:
            report = run_sweep(figure.jobs(fidelity), store, backend=backend, workers=workers,
                               progress=progress, desc=figure.name)
            if not report.ok:
                raise RuntimeError(f"{len(report.failed)} job(s) failed: " + next(iter(report.failed.values())))
            env = {"SANDBOX_FIDELITY": fidelity, "SANDBOX_RESULTS": str(results_dir.resolve()),
                   "SANDBOX_FIGURES": str(figures_dir.resolve()), "SANDBOX_CLAIMS": str(claims_path.resolve()),
                   "SANDBOX_WORKERS": str(workers or 1)}
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
        status = "ok" if o.ok else ("ERROR " + o.error if o.error else "claims failed")
        files = ", ".join(p.name for p in o.files) or "no figure written"
        lines.append(f"{o.name:<28} {o.seconds:7.1f}s  {status:<16} {files}")
    asserted = [c for o in outcomes for c in o.claims if c.passed is not None]
    reported = sum(c.passed is None for o in outcomes for c in o.claims)
    lines.append(f"\n{sum(c.passed for c in asserted)}/{len(asserted)} claims passed"
                 f"{f' ({reported} more reported, not asserted)' if reported else ''}; "
                 f"{sum(o.ok for o in outcomes)}/{len(outcomes)} figures ok")
    return "\n".join(lines)
