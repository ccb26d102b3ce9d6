"""``CLAIMS.md``: every figure's claims at one fidelity, with how and when each figure was made.

Written by ``sandbox reproduce --fidelity paper`` beside the figures it draws. It is rebuilt from
what the runs stored (``results/claims/NAME.FIDELITY.json`` and ``results/notebooks/…``, checked
by their checksums: a damaged one is named in one warning and its figure's row says to rerun it), so
a run resumed after an interruption, or one that redraws a single figure, still lists them all.
The registry module may publish ``published() -> {(figure, claim-name pattern): text}``: the
papers' statements set beside ours (the "published" column; patterns as in ``fnmatch``),
``headlines(results_dir, fidelity) -> markdown``: the papers' headline numbers beside ours, and
``fail_causes() -> {(figure, claim-name pattern): sentence}``: why a claim fails (reference
behaviour, budget, or genuine), printed beside each FAIL — a FAIL without one is flagged.

Totals count evidence and sanity checks apart: a sanity check (an identity, a closed form) cannot
fail unless the code is wrong, so it is never evidence. Each figure's row links its per-seed data
(``data/FIGURE.parquet`` beside this file) when the run exported it.
"""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase
from pathlib import Path

from sandbox.analysis.claims import load_claims
from sandbox.jobs.store import read_record
from sandbox.reproduce_costs import record_paths

log = logging.getLogger(__name__)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _published(published: dict, figure: str, claim: str) -> str:
    return next((text for (f, pattern), text in published.items() if f == figure and fnmatchcase(claim, pattern)), "")


#: what CLAIMS.md says beside a FAIL whose cause nobody has stated yet (tests look for it)
NO_CAUSE = "**cause not stated**"


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def claims_markdown(figures, fidelity: str, results_dir: str | Path, published: dict | None = None,
                    command: str = "", workers: int = 1, base_seed: int = 0,
                    last_run: tuple[int, float] | None = None, headlines: str = "",
                    causes: dict | None = None, data_dir: str | Path | None = None,
                    audit: list[str] | None = None) -> str:
    """The markdown of ``CLAIMS.md`` for ``figures`` (registry ``Figure`` objects) at ``fidelity``;
    ``last_run`` = (figures, wall seconds) of the invocation that writes it; ``headlines`` a
    markdown table of the papers' headline numbers beside ours; ``causes`` why claims fail;
    ``data_dir`` the folder of the per-figure data files (linked relative to CLAIMS.md); ``audit``
    the violations of ``sandbox.analysis.claim_audit``'s rules over every figure's claims."""
    results_dir = Path(results_dir)
    published, causes = published or {}, causes or {}
    rows, claim_rows, job_time, total_notebooks = [], [], {}, 0.0
    verdicts = {(kind, v): 0 for kind in ("evidence", "sanity") for v in ("PASS", "CHECK", "FAIL", "INFO")}
    for figure in figures:
        claims_path, record_path = record_paths(results_dir, figure.name, fidelity, base_seed)
        record, state, why = read_record(record_path)
        claims = load_claims(claims_path)
        data = Path(data_dir) / f"{figure.name}.parquet" if data_dir else None
        link = f"[data](data/{figure.name}.parquet)" if data is not None and data.is_file() else ""
        if state == "corrupt":
            log.warning("ignoring the damaged notebook record %s (%s)", record_path, why)
            rows.append(f"| `{figure.name}` | its record was damaged: run `sandbox reproduce {figure.name} "
                        f"--fidelity {fidelity}` again | | | | | |")
            continue
        if not (record and isinstance(record, dict)):
            rows.append(f"| `{figure.name}` | not run yet at {fidelity} fidelity | | | | | |")
            continue
        seconds = record.get("job_seconds", {})  # job id → compute seconds
        jobs_s, notebook_s = sum(seconds.values()), float(record.get("notebook_seconds", 0))
        job_time.update(seconds)  # a job shared by two figures counts once in the totals
        total_notebooks += notebook_s
        rows.append(f"| `{figure.name}` | {_cell(record.get('note', ''))} | {record.get('jobs', '')} | "
                    f"{_hours(jobs_s)} | {notebook_s:.0f} s | `{record.get('commit', '')}` {record.get('finished', '')} "
                    f"| {link} |")
        for c in claims:
            verdicts[(c.kind, c.verdict)] += 1
            seeds = f"{c.n}" + (f" ({c.diverged} diverged)" if c.diverged else "") if c.n else ""
            cause = (_published(causes, figure.name, c.name) or NO_CAUSE) if c.verdict == "FAIL" else ""
            test = c.detail + (f" — choice: {c.choice}" if c.choice else "") + (f" — {c.checks}" if c.checks else "")
            claim_rows.append(f"| `{figure.name}` | {_cell(c.statement)} | {c.kind} | {_cell(c.interval)} | {seeds} | "
                              f"{_cell(test)} | **{c.verdict}** | {_cell(cause)} | "
                              f"{_cell(_published(published, figure.name, c.name))} |")
    total_jobs = sum(job_time.values())
    wall = (total_jobs / max(workers, 1) + total_notebooks)
    last = (f" The invocation that wrote this file ran {last_run[0]} figure{'s' if last_run[0] != 1 else ''} in "
            f"{_hours(last_run[1])} of wall time (finished jobs and unchanged notebooks are reused, not rerun)."
            if last_run else "")
    head = [f"# Claims at {fidelity} fidelity", "",
            f"Made by `{command}`. Every figure's numbers, claims and figure files come from that command; "
            "a figure's row says the commit it was made at.", "",
            f"**Evidence:** {verdicts[('evidence', 'PASS')]} PASS, {verdicts[('evidence', 'FAIL')]} FAIL, "
            f"{verdicts[('evidence', 'INFO')]} INFO (reported, not asserted). "
            f"**Sanity checks** (identities and closed forms, never evidence): {verdicts[('sanity', 'CHECK')]} CHECK, "
            f"{verdicts[('sanity', 'FAIL')]} FAIL, {verdicts[('sanity', 'INFO')]} INFO.", "",
            f"Compute: {_hours(total_jobs)} of job time + {_hours(total_notebooks)} of notebooks; "
            f"at {workers} worker{'s' if workers != 1 else ''} that is about {_hours(wall)} of wall time "
            f"(a job shared by two figures counts once here, in each figure's row below).{last}", "",
            *(["## Published numbers beside ours", "", headlines, ""] if headlines else []),
            "## Figures", "",
            "Each figure's budget is in its row, against the paper's where the text available offline states it. "
            "The per-seed results behind a figure are its data file: `sandbox reproduce --fidelity paper` "
            "resumes from them and recomputes every claim without rerunning a job.", "",
            "| figure | budget: steps (of the paper's), seeds, data | jobs | job compute | notebook | commit, finished | "
            "per-seed data |",
            "|---|---|---|---|---|---|---|", *rows, "",
            "## Claims", "",
            "PASS / FAIL: an asserted claim about learning (*evidence*), with the interval valid at its seed "
            "count; CHECK: a *sanity* check (an identity, true by construction) that passed; INFO: reported, "
            "not asserted. A diverged seed counts as its metric's worst value. A FAIL says why in one sentence "
            "(reference behaviour, budget, or genuine). The published column is the paper's own number or "
            "statement where it gives one.", "",
            "| figure | claim | kind | value [interval] | seeds | test | verdict | why it fails | published |",
            "|---|---|---|---|---|---|---|---|---|", *claim_rows, "",
            *(_audit_section(audit) if audit is not None else [])]
    return "\n".join(head)


def write_claims_file(path: str | Path, figures, fidelity: str, results_dir: str | Path, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(claims_markdown(figures, fidelity, results_dir, **kwargs))
    return path


def _audit_section(audit: list[str]) -> list[str]:
    return ["## What makes a row evidence", "",
            "Beyond its own test, every asserted evidence row passes `sandbox.analysis.claim_audit`: an equivalence "
            "discriminates (both curves informative, the same test against the other method fails); no two rows "
            "are one measurement (per-seed agreement or |r| ≥ 0.999); a window, band, threshold or seed set "
            "chosen after its data is asserted only on seeds never used to choose it (the choice's commit and "
            "those seeds are in the row); a consequence of an identity or a theorem is a sanity check; a "
            "reported row that contradicts a paper's statement is asserted instead. "
            f"Violations in this file: **{len(audit)}**.", "",
            *[f"- {line}" for line in audit], ""]


#: the machine-readable twin of CLAIMS.md: every claim of every figure, with its per-seed vector
CLAIMS_JSON = "claims.json"


def write_claims_json(path: str | Path, figures, fidelity: str, results_dir: str | Path,
                      base_seed: int = 0) -> list:
    """Write every figure's claims (``Claim`` fields, per-seed vectors included) to ``path`` as
    plain JSON, one entry per claim, in figure order; a figure with no claims in ``results_dir``
    (not run into this results folder) keeps the entries ``path`` already holds. Returns the claims."""
    import dataclasses
    import json

    from sandbox.analysis.claim_table import Claim, read_claims

    path = Path(path)
    previous: dict[str, list] = {}
    if path.is_file():
        for entry in json.loads(path.read_text()):
            previous.setdefault(entry["figure"], []).append(entry)
    entries = []
    for figure in figures:
        claims, state, _ = read_claims(record_paths(results_dir, figure.name, fidelity, base_seed)[0])
        fresh = claims and state not in ("missing", "corrupt")
        entries += [dataclasses.asdict(c) for c in claims] if fresh else previous.get(figure.name, [])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=0, ensure_ascii=False) + "\n")
    return [Claim(**{**e, "values": tuple(e.get("values", ()))}) for e in entries]
