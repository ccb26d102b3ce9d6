"""``sandbox reproduce``: run the figures' sweeps, execute their notebooks, print the claims.

Each notebook is a jupytext percent-format ``.py``; it is executed with nbclient in a fresh
kernel with ``SANDBOX_FIDELITY``, ``SANDBOX_RESULTS``, ``SANDBOX_FIGURES`` and ``SANDBOX_CLAIMS``
set, writes its PNG and PDF, and records its claims. The executed ``.ipynb`` is saved beside the
source (its jupytext pair).

A notebook whose inputs did not change is not executed again: its execution is keyed on a hash of
(notebook source, its jobs' ids and stored results, fidelity and the other ``SANDBOX_*`` settings
it receives), and a rerun with the same key reuses its recorded claims and figure files.

Quick fidelity writes to ``figures/quick/`` (git-ignored), paper fidelity to ``paper_figures/``
(committed, with ``CLAIMS.md``), full fidelity (the complete grid, for a cluster) to
``figures/full/``: a quick check never overwrites the paper's figures. Before any notebook runs,
the jobs of every selected figure run as one sweep (one progress bar: jobs done, time left; the
workers stay busy across figures).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox.analysis import claim_audit, figure_data, provenance
from sandbox.analysis.claim_table import format_claims, read_claims
from sandbox.analysis.claims import Claim, load_claims
from sandbox.analysis.provenance import git_commit, is_dirty
from sandbox.claims_file import CLAIMS_JSON, write_claims_file, write_claims_json
from sandbox.core.plugins import entry_points_of
from sandbox.jobs.costs import announce
from sandbox.jobs.devices import device_from_env, on_device
from sandbox.jobs.fingerprints import shared_fingerprints
from sandbox.jobs.seeds import offset_seeds
from sandbox.jobs.store import ResultsStore, read_record, write_record
from sandbox.jobs.sweep import Job, run_sweep, unique_jobs
from sandbox.notebooks import execute_notebook, execute_notebooks
from sandbox.reproduce_costs import figures_plan, record_paths

log = logging.getLogger(__name__)

#: where each fidelity's figures go unless ``--figures`` / ``$SANDBOX_FIGURES`` says otherwise
FIGURES_DIRS = {"quick": Path("figures") / "quick", "paper": Path("paper_figures"), "full": Path("figures") / "full"}
#: the fidelities whose run writes ``CLAIMS.md`` beside its figures
CLAIMS_FILE_FIDELITIES = ("paper",)
#: settings a notebook receives that name places, not inputs: left out of its execution key
PLACES = ("SANDBOX_RESULTS", "SANDBOX_FIGURES", "SANDBOX_CLAIMS", "SANDBOX_WORKERS")
#: notebooks run side by side, one per core at most (each in its own kernel process)
CPUS = os.cpu_count() or 1


@dataclass
class FigureOutcome:
    name: str
    claims: list[Claim] = field(default_factory=list)
    error: str | None = None
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False  # the notebook's inputs had not changed: its recorded outcome was reused
    record: dict = field(default_factory=dict)  # what its execution recorded (times, note, commit)

    @property
    def made(self) -> bool:
        """The figure ran to its verdict: no error and at least one claim recorded (a FAIL is a
        result, not an error)."""
        return self.error is None and bool(self.claims)

    @property
    def ok(self) -> bool:
        """Made, and no asserted claim failed (a figure whose claims a fidelity cannot settle may
        record them all as reported)."""
        return self.made and all(c.passed is not False for c in self.claims)

    @property
    def reported_only(self) -> bool:
        return bool(self.claims) and all(c.passed is None for c in self.claims)


def default_figures_dir(fidelity: str) -> Path:
    """``$SANDBOX_FIGURES`` if set, else ``figures/quick``, ``paper_figures`` (paper) or ``figures/full``."""
    if fidelity not in FIGURES_DIRS:
        raise ValueError(f"fidelity must be one of {list(FIGURES_DIRS)}, got {fidelity!r}")
    return Path(os.environ.get("SANDBOX_FIGURES") or FIGURES_DIRS[fidelity])


def job_seconds(jobs: Sequence[Job], store: ResultsStore) -> dict[str, float]:
    """Compute time of each of ``jobs``: the seconds its stored result records (0 where a result
    predates that record)."""
    return {j.id: float(store.metadata(j.id).get("seconds", 0.0)) for j in unique_jobs(jobs)}


def figure_note(claims_path: Path) -> str:
    """The footer its notebook's ``save_figure`` wrote beside the claims (seeds, steps, data), if any."""
    path = Path(claims_path).with_suffix(".note.txt")
    return path.read_text().strip() if path.is_file() else ""


def notebook_key(source: Path, jobs: Sequence[Job], store: ResultsStore, env: dict[str, str],
                 code: Sequence[Path] = ()) -> str:
    """sha256 of the notebook source, its jobs' ids and stored results, its non-place settings and
    the ``code`` it runs (the figure modules and the library's analysis: claims, statistics, plots)."""
    digest = hashlib.sha256(Path(source).read_bytes())
    for path in sorted(code):
        digest.update(str(path.name).encode() + b"\0" + Path(path).read_bytes())
    for job in sorted(unique_jobs(jobs), key=lambda j: j.id):
        digest.update(job.id.encode())
        digest.update(hashlib.sha256(store.path(job.id).read_bytes()).digest())
    digest.update(json.dumps({k: v for k, v in env.items() if k not in PLACES}, sort_keys=True).encode())
    return digest.hexdigest()


def notebook_code(registry) -> list[Path]:
    """The sources a notebook's claims depend on besides its own: the figure registry's package
    (``simulations/*.py``) and ``sandbox/analysis/*.py``."""
    files = sorted(Path(__file__).resolve().parent.joinpath("analysis").glob("*.py"))
    module_file = getattr(registry, "__file__", None)
    if module_file:
        files += sorted(Path(module_file).resolve().parent.glob("*.py"))
    return files


def _cached(record: Path, key: str, claims_path: Path, figures_dir: Path) -> list[Path] | None:
    """The figure files of a previous execution with the same key, if they are all still there and
    its claims all held (a figure whose claims failed is recorded, for CLAIMS.md, but not reused).
    Its record and claims must be intact and made by this code (``read_record``): a damaged one
    is named in one warning and the notebook executed again."""
    saved, state, why = read_record(record)
    _, claims_state, claims_why = read_claims(claims_path)
    for path, state_of, damage in ((record, state, why), (claims_path, claims_state, claims_why)):
        if state_of == "corrupt":
            log.warning("%s is damaged (%s): executing its notebook again", path, damage)
            return None
    if state != "ok" or claims_state != "ok":  # not run yet, or by other code
        return None
    if saved.get("claims_failed"):  # executed again, so that the run reports the failure every time
        return None
    files = [figures_dir / name for name in saved.get("files", [])]
    return files if saved.get("key") == key and files and all(p.is_file() for p in files) else None


def _claims_failed(err: BaseException) -> bool:
    """Whether a notebook stopped at ``ClaimBook.check``'s verdict (an AssertionError, raised in the
    kernel or here) rather than at a defect — a crash, or claims that are not evidence as stated."""
    return isinstance(err, AssertionError) or getattr(err, "ename", None) == "AssertionError"


@dataclass
class _Figure:
    """One figure on its way: its sweep ran and its notebook's key was computed (``_prepare``);
    ``run`` executes its notebook (None: nothing to execute — cached, or it failed before);
    ``finish`` records what the execution gave."""

    name: str
    claims_path: Path
    figures_dir: Path
    run: Callable[[], None] | None = None
    record: Path | None = None
    error: str | None = None
    cached: bool = False
    seconds: float = 0.0
    complete: Callable[[BaseException | None, float], None] | None = None

    def finish(self, err: BaseException | None, seconds: float) -> None:
        self.seconds += seconds
        try:
            self.complete(err, seconds)
        except Exception as failure:  # report and go on to the next figure
            self.fail(failure)

    def fail(self, err: BaseException) -> None:
        self.error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
        log.error("figure %s failed: %s", self.name, err)

    def outcome(self) -> FigureOutcome:
        outcome = FigureOutcome(self.name, error=self.error, cached=self.cached)
        if self.record is not None and self.error is None:
            outcome.record = read_record(self.record)[0]
        outcome.claims = load_claims(self.claims_path)
        outcome.files = sorted(self.figures_dir.glob(f"{self.name}.*"))
        outcome.seconds = self.seconds
        return outcome


def _prepare(figure, jobs, store, registry, results_dir, figures_dir, fidelity, base_seed, workers, backend, progress,
             ray_address, committed, rerun, notebooks_dir) -> _Figure:
    """Run the figure's sweep (a no-op when the sweep of every figure ran) and decide whether its
    notebook must execute; a failure here is the figure's outcome, never the others'."""
    start = time.perf_counter()
    claims_path, record = record_paths(results_dir, figure.name, fidelity, base_seed)
    fig = _Figure(figure.name, claims_path, figures_dir)
    try:
        report = run_sweep(jobs, store, backend=backend, workers=workers, progress=progress,
                           ray_address=ray_address, desc=figure.name, accept_stale_code=committed or None,
                           announce=False)
        if not report.ok:
            raise RuntimeError(f"{len(report.failed)} job(s) failed: " + next(iter(report.failed.values())))
        env = {"SANDBOX_FIDELITY": fidelity, "SANDBOX_RESULTS": str(results_dir.resolve()),
               "SANDBOX_FIGURES": str(figures_dir.resolve()), "SANDBOX_CLAIMS": str(claims_path.resolve()),
               "SANDBOX_WORKERS": str(workers or 1), "SANDBOX_BASE_SEED": str(base_seed)}
        source = figure.notebook_path()
        key = notebook_key(source, jobs, store, env, notebook_code(registry))
        if committed:  # the notebook's own sweep keeps the restored committed results, as ours did
            kept = record.with_name(record.name.removesuffix(".json") + ".kept.json")
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(sorted({j.id for j in jobs} & committed)))
            env["SANDBOX_KEEP"] = str(kept.resolve())  # not in the key, which holds those results already
        fig.record = record
        fig.cached = (None if rerun else _cached(record, key, claims_path, figures_dir)) is not None
        if not fig.cached:
            claims_path.unlink(missing_ok=True)  # a failing notebook must not show stale claims
            claims_path.with_suffix(".note.txt").unlink(missing_ok=True)  # nor a stale footer
            output = (Path(notebooks_dir) / f"{source.stem}.ipynb") if notebooks_dir else source.with_suffix(".ipynb")
            fig.run = lambda: execute_notebook(source, output, env, progress=progress)

            def complete(err: BaseException | None, seconds: float) -> None:
                if err is not None and not (_claims_failed(err) and any(c.passed is False for c in load_claims(claims_path))):
                    raise err  # a failed claim is a result to record; a crash is not
                write_record(record, {
                    "key": key, "files": sorted(p.name for p in figures_dir.glob(f"{figure.name}.*")),
                    "fidelity": fidelity, "base_seed": base_seed, "notebook_seconds": round(seconds, 1),
                    "job_seconds": job_seconds(jobs, store), "jobs": len(unique_jobs(jobs)),
                    "note": figure_note(claims_path), "commit": git_commit(),
                    "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "claims_failed": err is not None})
                if fidelity in CLAIMS_FILE_FIDELITIES and not base_seed:  # the per-seed data CLAIMS.md links
                    figure_data.export(jobs, store, figures_dir / "data" / f"{figure.name}.parquet",
                                       figure_data.DataSpec.of(getattr(figure, "data_spec", None)))

            fig.complete = complete
    except Exception as err:  # report and go on to the next figure
        fig.fail(err)
    fig.seconds = time.perf_counter() - start
    return fig


def figures():
    """The figure registry (``select(names)``, ``FIDELITIES``; optionally ``published``,
    ``headlines``, ``fail_causes``): the module named by the one ``sandbox.figure_registry`` entry
    point (``simulations`` in pyproject.toml), which loads the figure families of the
    ``sandbox.figures`` entry points. The experiment families live outside the library, which
    reaches them only through these entry points."""
    registries = entry_points_of("sandbox.figure_registry")
    if len(registries) != 1:
        raise ValueError(f"one figure registry expected in the sandbox.figure_registry entry points, found "
                         f"{sorted(registries)}")
    return next(iter(registries.values())).load()


@shared_fingerprints()
def reproduce(names=None, fidelity: str = "quick", results_dir: str | os.PathLike = "results",
              figures_dir: str | os.PathLike | None = None, notebooks_dir: str | os.PathLike | None = None,
              workers: int | None = None, backend: str = "local", progress: bool = True,
              ray_address: str | None = None, rerun: bool = False, base_seed: int = 0,
              allow_dirty: bool | None = None, recompute: bool = False) -> list[FigureOutcome]:
    """Run the selected figures end to end; a failing figure does not stop the others (an
    interrupt does: ``KeyboardInterrupt`` propagates, every finished result stays stored).

    ``figures_dir`` defaults to ``default_figures_dir(fidelity)``; ``rerun`` executes notebooks
    even when their inputs did not change; ``base_seed`` K moves every job's seeds by
    K·SEED_STRIDE (``offset_seeds``): an independent replication. The sweeps' workers and the
    notebooks' kernels share the fingerprints they compute (``shared_fingerprints``).
    ``allow_dirty`` (default ``$SANDBOX_ALLOW_DIRTY``): a paper-fidelity run into this repository
    from a tree with uncommitted changes is refused (``check_clean``) unless it is set, and then
    CLAIMS.md says so. ``recompute``: run the selected figures' jobs at this commit instead of
    restoring their committed per-seed data (``committed_evidence``)."""
    started = time.perf_counter()
    registry = figures()
    if fidelity not in registry.FIDELITIES:
        raise ValueError(f"fidelity must be one of {list(registry.FIDELITIES)}, got {fidelity!r}")
    figures_dir = Path(figures_dir) if figures_dir is not None else default_figures_dir(fidelity)
    allow_dirty = check_clean(fidelity, figures_dir, allow_dirty)
    offset_seeds([], base_seed)  # validates it
    chosen = registry.select(names)
    results_dir = Path(results_dir)
    store = ResultsStore(results_dir)
    device = device_from_env()  # --device: run configs whose task can, on that device (sandbox.jobs.devices)
    all_jobs = {f.name: on_device(offset_seeds(f.jobs(fidelity), base_seed), device) for f in chosen}
    committed = committed_evidence(chosen, all_jobs, store, figures_dir, fidelity, base_seed, recompute)
    if progress:
        announce(figures_plan(all_jobs, store, results_dir, fidelity, base_seed, workers, rerun, committed))
    if len(chosen) > 1:  # every figure's jobs in one sweep: one progress bar, no idle worker between figures
        run_sweep([j for jobs in all_jobs.values() for j in jobs], store, backend=backend, workers=workers,
                  progress=progress, ray_address=ray_address, desc=f"jobs of {len(chosen)} figures",
                  accept_stale_code=committed or None, announce=False)
    prepared = [_prepare(figure, all_jobs[figure.name], store, registry, results_dir, figures_dir, fidelity,
                         base_seed, workers, backend, progress, ray_address, committed, rerun, notebooks_dir)
                for figure in chosen]
    to_run = [p for p in prepared if p.run is not None]
    executed = execute_notebooks([p.run for p in to_run], workers=min(workers or CPUS, CPUS))
    for p, (_, err, seconds) in zip(to_run, executed):
        p.finish(err, seconds)
    outcomes = [p.outcome() for p in prepared]
    failed = {o.name: o.error or "no claims recorded" for o in outcomes if not o.made}  # keep their last good rows
    if fidelity in CLAIMS_FILE_FIDELITIES:
        published = registry.published() if hasattr(registry, "published") else None
        rules = registry.audit_rules() if hasattr(registry, "audit_rules") else {}
        every = write_claims_json(figures_dir / CLAIMS_JSON, registry.select(), fidelity, results_dir, base_seed,
                                  ran={f.name for f in chosen}, published=published, starts=rules.get("starts"),
                                  failed=failed)
        settled = {}
        for claim in every:  # the verdicts as CLAIMS.md shows them (settled across figures), for the summary
            settled.setdefault(claim.figure, []).append(claim)
        outcomes = [replace(o, claims=settled[o.name]) if o.made and o.name in settled else o for o in outcomes]
        audit = claim_audit.audit(every, published=published, **rules)
        for line in audit:
            log.warning("claims audit: %s", line)
        write_claims_file(figures_dir / "CLAIMS.md", registry.select(), fidelity, results_dir, audit=audit,
                          published=published,
                          headlines=registry.headlines(results_dir, fidelity) if hasattr(registry, "headlines") else "",
                          causes=registry.fail_causes() if hasattr(registry, "fail_causes") else None,
                          data_dir=figures_dir / "data",
                          command=reproduce_command(fidelity, workers, base_seed), workers=workers or 1,
                          base_seed=base_seed, last_run=(len(chosen), time.perf_counter() - started),
                          ran={f.name for f in chosen}, starts=rules.get("starts"), allow_dirty=allow_dirty, failed=failed,
                          restored={f.name for f in chosen if {j.id for j in all_jobs[f.name]} <= committed})
        # the others keep their rows of the file it replaces
    return outcomes


def committed_evidence(chosen, all_jobs: dict, store: ResultsStore, figures_dir: Path, fidelity: str,
                       base_seed: int, recompute: bool = False) -> set[str]:
    """The ids of the committed per-seed results (``figures_dir/data``) restored into ``store`` for
    the ``chosen`` figures at a fidelity that writes CLAIMS.md (``figure_data.restore_figures``).
    ``recompute``: none — the chosen figures' stored results are discarded, so that their jobs run
    at this commit and their rows in CLAIMS.md name it alone (no 'data made at' an older one)."""
    if recompute:
        for job in {j.id for jobs in all_jobs.values() for j in jobs}:
            store.discard(job)
        return set()
    if fidelity not in CLAIMS_FILE_FIDELITIES or base_seed:
        return set()
    return figure_data.restore_figures(chosen, all_jobs, store, figures_dir / "data")


def check_clean(fidelity: str, figures_dir: Path, allow_dirty: bool | None) -> bool:
    """Refuse a paper-fidelity run that writes into this repository (its committed figures and
    CLAIMS.md) from a tree with uncommitted changes (``git_commit`` ends in ``-dirty``): its rows
    could not be traced to a commit. ``allow_dirty`` (None: whether ``$SANDBOX_ALLOW_DIRTY`` is set)
    lets it run; returns whether it runs dirty by leave. A run into a folder outside the repository
    commits nothing and is not checked."""
    allow = bool(os.environ.get("SANDBOX_ALLOW_DIRTY")) if allow_dirty is None else bool(allow_dirty)
    inside = Path(figures_dir).resolve().is_relative_to(provenance.ROOT)
    if fidelity not in CLAIMS_FILE_FIDELITIES or not inside or not is_dirty(git_commit()):
        return False
    if not allow:
        raise ValueError(f"the tree has uncommitted changes ({git_commit()}): a {fidelity}-fidelity run must be made "
                         "from a clean tree — commit first, or allow it (--allow-dirty, allow_dirty=True, SANDBOX_ALLOW_DIRTY=1), "
                         "which CLAIMS.md then states")
    return True


def reproduce_command(fidelity: str, workers: int | None, base_seed: int) -> str:
    parts = ["sandbox reproduce", f"--fidelity {fidelity}"]
    parts += [f"--workers {workers}"] if workers else []
    parts += [f"--base-seed {base_seed}"] if base_seed else []
    return " ".join(parts)


def summary(outcomes: list[FigureOutcome], width: int = 120) -> str:
    """The claim table, one line per figure (ok, FAIL with how many claims, or ERROR when it could not
    be made) and a closing line of counts."""
    lines = [format_claims([c for o in outcomes for c in o.claims]), ""]
    for o in outcomes:
        failed = sum(c.passed is False for c in o.claims)
        status = ("ERROR " + o.error) if not o.made else (f"FAIL ({failed} claim{'s' if failed != 1 else ''})" if failed
                                                           else "ok (reported only)" if o.reported_only else "ok")
        status += " (cached)" if o.made and o.cached else ""
        files = ", ".join(p.name for p in o.files) or "no figure written"
        lines.append(textwrap.fill(f"{o.name:<24} {o.seconds:6.1f}s  {status:<12} {files}", width,
                                   subsequent_indent=" " * 34, break_on_hyphens=False))
    claims = [c for o in outcomes for c in o.claims]
    count = {(kind, verdict): sum(c.kind == kind and c.verdict == verdict for c in claims)
             for kind in ("evidence", "sanity") for verdict in ("PASS", "CHECK", "FAIL", "INFO")}
    errors = sum(not o.made for o in outcomes)
    lines.append("\n" + textwrap.fill(
        f"evidence: {count['evidence', 'PASS']} PASS, {count['evidence', 'FAIL']} FAIL, "
        f"{count['evidence', 'INFO']} INFO; sanity: {count['sanity', 'CHECK']} CHECK, "
        f"{count['sanity', 'FAIL']} FAIL; {len(outcomes) - errors}/{len(outcomes)} figures made"
        + (f", {errors} could not be made (ERROR)" if errors else ""), width))
    if count["evidence", "FAIL"] or count["sanity", "FAIL"]:
        lines.append("a FAIL is a verdict on the claim, not an error of the run (exit 0; --strict makes it 1)")
    return "\n".join(lines)
