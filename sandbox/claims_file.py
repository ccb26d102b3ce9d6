"""``CLAIMS.md``: every figure's claims at one fidelity, with how and when each figure was made.

Written by ``sandbox reproduce --fidelity paper`` beside the figures it draws. It is rebuilt from
what the runs stored (``results/claims/NAME.FIDELITY.json`` and ``results/notebooks/…``, checked
by their checksums: a damaged one is named in one warning and its figure's row says to rerun it), so
a run resumed after an interruption, or one that redraws a single figure, still lists them all.
The registry module may publish ``published() -> {(figure, claim-name pattern): text}``: the
papers' statements set beside ours (the "published" column; patterns as in ``fnmatch``), and
``headlines(results_dir, fidelity) -> markdown``: the papers' headline numbers beside ours.
"""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase
from pathlib import Path

from sandbox.analysis.claims import load_claims
from sandbox.analysis.store import read_record
from sandbox.reproduce_costs import record_paths

log = logging.getLogger(__name__)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _published(published: dict, figure: str, claim: str) -> str:
    return next((text for (f, pattern), text in published.items() if f == figure and fnmatchcase(claim, pattern)), "")


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def claims_markdown(figures, fidelity: str, results_dir: str | Path, published: dict | None = None,
                    command: str = "", workers: int = 1, base_seed: int = 0,
                    last_run: tuple[int, float] | None = None, headlines: str = "") -> str:
    """The markdown of ``CLAIMS.md`` for ``figures`` (registry ``Figure`` objects) at ``fidelity``;
    ``last_run`` = (figures, wall seconds) of the invocation that writes it; ``headlines`` a
    markdown table of the papers' headline numbers beside ours."""
    results_dir = Path(results_dir)
    published = published or {}
    rows, claim_rows, job_time, total_notebooks = [], [], {}, 0.0
    verdicts = dict.fromkeys(("PASS", "CHECK", "FAIL", "INFO"), 0)
    for figure in figures:
        claims_path, record_path = record_paths(results_dir, figure.name, fidelity, base_seed)
        record, state, why = read_record(record_path)
        claims = load_claims(claims_path)
        if state == "corrupt":
            log.warning("ignoring the damaged notebook record %s (%s)", record_path, why)
            rows.append(f"| `{figure.name}` | its record was damaged: run `sandbox reproduce {figure.name} "
                        f"--fidelity {fidelity}` again | | | | |")
            continue
        if not (record and isinstance(record, dict)):
            rows.append(f"| `{figure.name}` | not run yet at {fidelity} fidelity | | | | |")
            continue
        seconds = record.get("job_seconds", {})  # job id → compute seconds
        jobs_s, notebook_s = sum(seconds.values()), float(record.get("notebook_seconds", 0))
        job_time.update(seconds)  # a job shared by two figures counts once in the totals
        total_notebooks += notebook_s
        rows.append(f"| `{figure.name}` | {_cell(record.get('note', ''))} | {record.get('jobs', '')} | "
                    f"{_hours(jobs_s)} | {notebook_s:.0f} s | `{record.get('commit', '')}` {record.get('finished', '')} |")
        for c in claims:
            verdicts[c.verdict] += 1
            seeds = f"{c.n}" + (f" ({c.diverged} diverged)" if c.diverged else "") if c.n else ""
            claim_rows.append(f"| `{figure.name}` | {_cell(c.statement)} | {c.kind} | {_cell(c.interval)} | {seeds} | "
                              f"{_cell(c.detail)} | **{c.verdict}** | {_cell(_published(published, figure.name, c.name))} |")
    total_jobs = sum(job_time.values())
    wall = (total_jobs / max(workers, 1) + total_notebooks)
    last = (f" The invocation that wrote this file ran {last_run[0]} figure{'s' if last_run[0] != 1 else ''} in "
            f"{_hours(last_run[1])} of wall time (finished jobs and unchanged notebooks are reused, not rerun)."
            if last_run else "")
    head = [f"# Claims at {fidelity} fidelity", "",
            f"Made by `{command}`. Every figure's numbers, claims and figure files come from that command; "
            "a figure's row says the commit it was made at.", "",
            f"**Totals:** {verdicts['PASS']} PASS, {verdicts['CHECK']} CHECK (sanity checks that passed), "
            f"{verdicts['FAIL']} FAIL, {verdicts['INFO']} INFO (reported, not asserted). "
            f"Compute: {_hours(total_jobs)} of job time + {_hours(total_notebooks)} of notebooks; "
            f"at {workers} worker{'s' if workers != 1 else ''} that is about {_hours(wall)} of wall time "
            f"(a job shared by two figures counts once here, in each figure's row below).{last}", "",
            *(["## Published numbers beside ours", "", headlines, ""] if headlines else []),
            "## Figures", "",
            "| figure | seeds, steps, data | jobs | job compute | notebook | commit, finished |",
            "|---|---|---|---|---|---|", *rows, "",
            "## Claims", "",
            "PASS / FAIL: an asserted claim about learning (*evidence*), with the interval valid at its seed "
            "count; CHECK: a *sanity* check (an identity, true by construction) that passed; INFO: reported, "
            "not asserted. A diverged seed counts as its metric's worst value. The published column is the "
            "paper's own number or statement where it gives one.", "",
            "| figure | claim | kind | value [interval] | seeds | test | verdict | published |",
            "|---|---|---|---|---|---|---|---|", *claim_rows, ""]
    return "\n".join(head)


def write_claims_file(path: str | Path, figures, fidelity: str, results_dir: str | Path, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(claims_markdown(figures, fidelity, results_dir, **kwargs))
    return path
