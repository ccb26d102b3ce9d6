"""``CLAIMS.md``: every figure's claims at one fidelity, with how and when each figure was made.

Written by ``sandbox reproduce --fidelity paper`` beside the figures it draws. It is rebuilt from
what the runs stored (``results/claims/NAME.FIDELITY.json`` and ``results/notebooks/…``, checked
by their checksums: a damaged one is named in one warning and its figure's row says to rerun it), so
a run resumed after an interruption, or one that redraws a single figure, still lists them all. A
figure this results folder has no record of keeps its rows of the file being replaced — its figure
row, its claims and its headline rows — so ``sandbox reproduce gate --fidelity paper`` into a fresh
folder updates gate's rows and keeps the others. A figure whose notebook failed this invocation keeps its
last good rows too, its figure row marked ``(last good rows; re-run failed: ERROR)``; the totals are counted over the whole new file
(kept rows included; their job time from their per-seed data files, a job counted once).
The registry module may publish ``published() -> {(figure, claim-name pattern): text}``: the
papers' statements set beside ours (the "published" column; patterns as in ``fnmatch``),
``headlines(results_dir, fidelity) -> markdown``: the papers' headline numbers beside ours, and
``fail_causes() -> {(figure, claim-name pattern): sentence}``: why a claim fails (genuine, also in
the paper's own code, the budget, the friction's ceiling, or inconclusive), printed beside each FAIL. A claim whose test states its own cause,
decided by code declared before its data (its detail ends "; cause: SENTENCE", as each case of
published-outcomes does), shows that sentence where no entry names it; a FAIL without either is flagged.

Totals count evidence and sanity checks apart: a sanity check (an identity, a closed form) cannot
fail unless the code is wrong, so it is never evidence. Each figure's row links its per-seed data
(``data/FIGURE.parquet`` beside this file) when the run exported it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from sandbox.analysis import claim_audit
from sandbox.analysis.claim_counts import cells as _cells
from sandbox.analysis.claim_counts import section as _section
from sandbox.analysis.provenance import names_dirty_commit
from sandbox.analysis.claims import Claim, load_claims
from sandbox.jobs.store import read_record
from sandbox.reproduce_costs import record_paths

log = logging.getLogger(__name__)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _published(published: dict, figure: str, claim: str) -> str:
    return next((text for (f, pattern), text in published.items() if f == figure and fnmatchcase(claim, pattern)), "")


def _stated(published: dict, c: Claim) -> str:
    """The papers' statements a row tests: its own name's, and those of the rows folded into it."""
    texts = (_published(published, c.figure, name) for name in (c.name, *(f[0] for f in c.also)))
    return "; ".join(dict.fromkeys(t for t in texts if t))


#: how a row of CLAIMS.md lists the reported rows folded into it (``claim_audit.fold``)
FOLDED = "one row for one measurement, which also states"


def _folds(c: Claim) -> str:
    return f" — {FOLDED}: " + "; ".join(f"{f.statement} (`{f.name}`)" for f in claim_audit.folded(c)) if c.also else ""


#: what CLAIMS.md says beside a FAIL whose cause nobody has stated yet (tests look for it)
NO_CAUSE = "**cause not stated**"
#: how a claim's detail states its own cause (the text after it, to the end)
STATED_CAUSE = "; cause: "


def _cause(causes: dict, figure: str, claim: Claim) -> str:
    """Why a FAIL fails: the registry's sentence for it, else the one its detail states, else NO_CAUSE."""
    own = claim.detail.split(STATED_CAUSE, 1)[1].strip() if STATED_CAUSE in (claim.detail or "") else ""
    return _published(causes, figure, claim.name) or own or NO_CAUSE


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


@dataclass
class Previous:
    """The rows of a CLAIMS.md being replaced, by figure: its figure row, its claim rows, and the
    headline rows (each with the figures it names)."""

    figure_rows: dict[str, str] = field(default_factory=dict)
    claim_rows: dict[str, list[str]] = field(default_factory=dict)
    headline_rows: list[tuple[str, set[str]]] = field(default_factory=list)

    @classmethod
    def read(cls, path: str | Path) -> Previous:
        path = Path(path)
        return cls.read_text(path.read_text()) if path.is_file() else cls()

    @classmethod
    def read_text(cls, text: str) -> Previous:
        previous = cls()
        for row in _section(text, "Figures"):
            name = _cells(row)[0].strip("`")
            previous.figure_rows[name] = row
        for row in _section(text, "Claims"):
            previous.claim_rows.setdefault(_cells(row)[0].strip("`"), []).append(row)
        for row in _section(text, "Published numbers beside ours"):
            previous.headline_rows.append((row, set(re.findall(r"`([a-z0-9][a-z0-9-]*)`", row))))
        return previous


def _seconds(text: str) -> float:
    """Seconds of a CLAIMS.md time cell ('13 s', '1.4 min', '2.03 h'); 0 when unreadable."""
    match = re.fullmatch(r"([\d.]+) (s|min|h)", text.strip())
    return float(match.group(1)) * {"s": 1, "min": 60, "h": 3600}[match.group(2)] if match else 0.0


def _data_seconds(data: Path | None) -> dict[str, float] | None:
    """Job id → compute seconds of a per-seed data file (None if it cannot be read)."""
    if data is None or not data.is_file():
        return None
    try:
        from sandbox.analysis.figure_data import job_seconds_in

        return job_seconds_in(data)
    except Exception:  # noqa: BLE001 — an unreadable data file: the row's own figure
        return None


def _merge_headlines(new: str, previous: Previous, kept: set[str], known: Collection[str] = ()) -> str:
    """The new headline table, each row that names only kept figures (not run here) taken from the
    previous file instead; of the names a row sets in backticks only those of ``known`` figures
    count (when given): a claim's name, as `stale-ess-drops`, is no figure run here."""
    if not (new and previous.headline_rows and kept):
        return new
    old = {tuple(_cells(row)[:3]): (row, names) for row, names in previous.headline_rows}
    lines = new.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or i < 2:
            continue
        row, names = old.get(tuple(_cells(line)[:3]), (None, set()))
        names = names & set(known) if known else names
        if row is not None and names and names <= kept:
            lines[i] = row
        elif row is not None and known and names & kept:  # run and kept figures: each kept one's part as it was
            cells, before = _cells(line), _parts(_cells(row)[SANDBOX_CELL], known)
            now = _parts(cells[SANDBOX_CELL], known)
            cells[SANDBOX_CELL] = "; ".join(before[n] if n in kept and n in before else part for n, part in now.items())
            lines[i] = "| " + " | ".join(cells) + " |"
    return "\n".join(lines)


#: the headline table's column of our numbers: "`figure`: …" parts, one per figure, joined by "; "
SANDBOX_CELL = 5


def _parts(cell: str, known: Collection[str]) -> dict[str, str]:
    """A headline cell's part per figure (``known`` names), in order: each from "`figure`: " to the next."""
    pattern = re.compile("`(" + "|".join(re.escape(n) for n in sorted(known, key=len, reverse=True)) + ")`: ")
    starts = [(m.start(), m.group(1)) for m in pattern.finditer(cell)]
    ends = [start - 2 for start, _ in starts[1:]] + [len(cell)]  # each part ends before the "; " of the next
    return {name: cell[start:end] for (start, name), end in zip(starts, ends)}


def claims_markdown(figures, fidelity: str, results_dir: str | Path, published: dict | None = None,
                    command: str = "", workers: int = 1, base_seed: int = 0,
                    last_run: tuple[int, float] | None = None, headlines: str = "",
                    causes: dict | None = None, data_dir: str | Path | None = None,
                    previous: Previous | None = None, ran: Collection[str] = (),
                    audit: list[str] | None = None, starts: dict | None = None, allow_dirty: bool = False,
                    restored: Collection[str] = (), failed: dict[str, str] | None = None) -> str:
    """The markdown of ``CLAIMS.md`` for ``figures`` (registry ``Figure`` objects) at ``fidelity``;
    ``last_run`` = (figures, wall seconds) of the invocation that writes it; ``headlines`` a
    markdown table of the papers' headline numbers beside ours; ``causes`` why claims fail;
    ``data_dir`` the folder of the per-figure data files (linked relative to CLAIMS.md);
    ``previous`` the rows of the file being replaced, kept for the figures this invocation did not
    run (not in ``ran``) and that have no record here; ``audit`` the violations of
    ``sandbox.analysis.claim_audit``'s rules over every figure's claims; each figure's rows are
    ``claim_audit.settle``d with ``published`` and ``starts`` (the class the rules allow).
    ``allow_dirty``: rows made from a tree with uncommitted changes are accepted, and the file says so;
    ``restored`` the figures whose every job came from the committed data file: their row keeps the
    commit the data were made at (``data_made_at``) beside the one the claims were computed at;
    ``failed`` figure → the error its notebook failed with this invocation: it keeps its last good
    rows, marked (``last_good``), never "not run yet" (issue 46, R2)."""
    results_dir = Path(results_dir)
    published, causes, previous, failed = published or {}, causes or {}, previous or Previous(), failed or {}
    kept: set[str] = set()
    rows, claim_rows, job_time, total_notebooks = [], [], {}, 0.0
    verdicts = {(kind, v): 0 for kind in ("evidence", "sanity") for v in ("PASS", "CHECK", "FAIL", "INFO")}
    figures = list(figures)
    settled = settled_claims([[] if f.name in failed else load_claims(record_paths(results_dir, f.name, fidelity,
                                                                                   base_seed)[0]) for f in figures],
                             published, starts)
    for figure, claims in zip(figures, settled):
        claims_path, record_path = record_paths(results_dir, figure.name, fidelity, base_seed)
        record, state, why = read_record(record_path)
        data = Path(data_dir) / f"{figure.name}.parquet" if data_dir else None
        link = f"[data](data/{figure.name}.parquet)" if data is not None and data.is_file() else ""
        if state == "corrupt":
            log.warning("ignoring the damaged notebook record %s (%s)", record_path, why)
            rows.append(f"| `{figure.name}` | its record was damaged: run `sandbox reproduce {figure.name} "
                        f"--fidelity {fidelity}` again | | | | | |")
            continue
        if figure.name in failed and figure.name not in previous.figure_rows:
            rows.append(f"| `{figure.name}` | {_cell(last_good('', failed[figure.name]))} no earlier rows | | | | | |")
            continue
        if figure.name in failed or (not (record and isinstance(record, dict)) and figure.name in previous.figure_rows
                                     and figure.name not in ran):
            kept.add(figure.name)  # not run into this results folder, or its notebook failed: its rows as they were
            row = previous.figure_rows[figure.name]
            rows.append(_marked(row, failed[figure.name]) if figure.name in failed else row)
            cells = _cells(previous.figure_rows[figure.name])
            seconds = _data_seconds(data)
            job_time.update(seconds if seconds is not None else {f"{figure.name} (row)": _seconds(cells[3])})
            total_notebooks += _seconds(cells[4])
            for row in previous.claim_rows.get(figure.name, []):
                kind, verdict = _cells(row)[2], _cells(row)[6].strip("*")
                if (kind, verdict) in verdicts:
                    verdicts[(kind, verdict)] += 1
                claim_rows.append(row)
            continue
        if not (record and isinstance(record, dict)):
            rows.append(f"| `{figure.name}` | not run yet at {fidelity} fidelity | | | | | |")
            continue
        seconds = record.get("job_seconds", {})  # job id → compute seconds
        jobs_s, notebook_s = sum(seconds.values()), float(record.get("notebook_seconds", 0))
        job_time.update(seconds)  # a job shared by two figures counts once in the totals
        total_notebooks += notebook_s
        made = f"`{record.get('commit', '')}` {record.get('finished', '')}"
        old = previous.figure_rows.get(figure.name)
        if figure.name in restored and old:
            made += f"; {DATA_MADE_AT} {data_made_at(_cells(old)[5])}"
        rows.append(f"| `{figure.name}` | {_cell(record.get('note', ''))} | {record.get('jobs', '')} | "
                    f"{_hours(jobs_s)} | {notebook_s:.0f} s | {made} | {link} |")
        for c in claims:
            verdicts[(c.kind, c.verdict)] += 1
            seeds = f"{c.n}" + (f" ({c.diverged} diverged)" if c.diverged else "") if c.n else ""
            cause = _cause(causes, figure.name, c) if c.verdict == "FAIL" else ""
            test = c.detail + (f" — choice: {c.choice}" if c.choice else "") + (f" — {c.checks}" if c.checks else "") \
                + _folds(c)
            claim_rows.append(f"| `{figure.name}` | {_cell(c.statement)} | {c.kind} | {_cell(c.interval)} | {seeds} | "
                              f"{_cell(test)} | **{c.verdict}** | {_cell(cause)} | "
                              f"{_cell(_stated(published, c))} |")
    total_jobs = sum(job_time.values())
    wall = (total_jobs / max(workers, 1) + total_notebooks)
    last = (f" The invocation that wrote this file ran {last_run[0]} figure{'s' if last_run[0] != 1 else ''} in "
            f"{_hours(last_run[1])} of wall time (finished jobs and unchanged notebooks are reused, not rerun)."
            if last_run else "")
    head = [f"# Claims at {fidelity} fidelity", "",
            f"Made by `{command}`. Every figure's numbers, claims and figure files come from that command; "
            "a figure's row says the commit its claims were computed at and, where they were recomputed from the "
            "committed per-seed data, the commit that data was made at"
            + (f" ({DIRTY_LEGEND})." if any(names_dirty_commit(r) for r in rows) else "."),
            "", *([f"**{DIRTY_STAMP}** (`{_dirty_commit()}`)", ""] if allow_dirty else []),
            f"**Evidence:** {verdicts[('evidence', 'PASS')]} PASS, {verdicts[('evidence', 'FAIL')]} FAIL, "
            f"{verdicts[('evidence', 'INFO')]} INFO (reported, not asserted). "
            f"**Sanity checks** (identities and closed forms, never evidence): {verdicts[('sanity', 'CHECK')]} CHECK, "
            f"{verdicts[('sanity', 'FAIL')]} FAIL, {verdicts[('sanity', 'INFO')]} INFO.", "",
            f"Compute: {_hours(total_jobs)} of job time + {_hours(total_notebooks)} of notebooks; "
            f"at {workers} worker{'s' if workers != 1 else ''} that is about {_hours(wall)} of wall time "
            f"(a job shared by two figures counts once here, in each figure's row below).{last}", "",
            *(["## Published numbers beside ours", "", _merge_headlines(headlines, previous, kept, {f.name for f in figures}), ""]
              if headlines else []),
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
            "(genuine; genuine and reproduced by the paper's own code; the budget; the friction's ceiling; or "
            "inconclusive). The published column is the paper's own number or "
            "statement where it gives one.", "",
            "| figure | claim | kind | value [interval] | seeds | test | verdict | why it fails | published |",
            "|---|---|---|---|---|---|---|---|---|", *claim_rows, "",
            *(_audit_section(audit) if audit is not None else [])]
    return "\n".join(head)


#: how a figure row whose notebook failed says its rows are an earlier run's (tests look for it)
LAST_GOOD = "(last good rows; re-run failed: "


def last_good(note: str, error: str) -> str:
    """A figure row's note cell marked as its last good rows, the failure named (an earlier mark replaced)."""
    note = note.split(LAST_GOOD, 1)[0].rstrip()
    return f"{note} {LAST_GOOD}{error})".lstrip()


def _marked(row: str, error: str) -> str:
    cells = _cells(row)
    cells[1] = last_good(cells[1], _cell(error))  # the note is markdown already
    return "| " + " | ".join(cells) + " |"


#: how a figure row names the commit of the per-seed data its claims were recomputed from
DATA_MADE_AT = "data made at"
#: how the header explains a ``-dirty`` commit, said only while a figure row carries one
DIRTY_LEGEND = "`-dirty`: a tree with uncommitted changes"
#: what CLAIMS.md says when ``--allow-dirty`` let a paper run go on from a tree with uncommitted changes
DIRTY_STAMP = "Made with --allow-dirty from a tree with uncommitted changes: its rows cannot be traced to a commit"


def data_made_at(cell: str) -> str:
    """The data provenance of a previous figure row's commit cell: its 'data made at' part, else the whole cell."""
    return cell.split(f"{DATA_MADE_AT} ", 1)[1] if f"{DATA_MADE_AT} " in cell else cell


def _dirty_commit() -> str:
    from sandbox.analysis.provenance import git_commit

    return git_commit()


def settled_claims(per_figure: list[list[Claim]], published: dict | None, starts: dict | None) -> list[list[Claim]]:
    """Each figure's claims with the class ``claim_audit.settle`` gives them, settled together (a row
    another figure asserts on the same measurement is counted there, not asserted twice)."""
    every = claim_audit.settle([c for claims in per_figure for c in claims], published, starts)
    out, start = [], 0
    for claims in per_figure:
        out.append(every[start:start + len(claims)])
        start += len(claims)
    return out


def write_claims_file(path: str | Path, figures, fidelity: str, results_dir: str | Path, **kwargs) -> Path:
    """Write ``claims_markdown`` to ``path`` (atomically), keeping the rows of the figures this
    invocation did not run (``ran``) and this results folder has no record of from the file it replaces."""
    from sandbox.jobs.store import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = claims_markdown(figures, fidelity, results_dir, previous=Previous.read(path), **kwargs)
    return atomic_write(path, lambda f: f.write(text.encode()))


def _audit_section(audit: list[str]) -> list[str]:
    return ["## What makes a row evidence", "",
            "Every row, whatever its label, passes `sandbox.analysis.claim_audit`, and its class is recomputed by "
            "`claim_audit.settle` from its per-seed values: no two asserted rows are one measurement (per-seed "
            "agreement — one constant at every seed of both included —, an affine map with |r| ≥ 0.99 without any "
            "one seed, the same order of seeds, or a subset of seeds), of rows that are one measurement a FAIL counts "
            "before a PASS, whatever their order, and a reported row names the asserted row that counts its "
            "measurement; a "
            "consequence of an identity, or a restatement of one, is a sanity check; a CHECK is an identity or "
            "closed form the audit verifies (no sampling; exact or within its stated tolerance); an equivalence "
            "PASSes only if its band is narrower than the gap the same test shows against the other method; a "
            "difference PASSes only if both arms moved from their declared start; a window, band, threshold or seed "
            "set chosen after its data is asserted only on seeds never used to choose it; a reported row whose "
            "interval decides a paper's statement is asserted. "
            f"Violations in this file: **{len(audit)}**.", "",
            *[f"- {line}" for line in audit], ""]


#: the machine-readable twin of CLAIMS.md: every claim of every figure, with its per-seed vector
CLAIMS_JSON = "claims.json"


def write_claims_json(path: str | Path, figures, fidelity: str, results_dir: str | Path,
                      base_seed: int = 0, ran: Collection[str] = (), published: dict | None = None,
                      starts: dict | None = None, failed: Collection[str] = ()) -> list:
    """Write every figure's claims (``Claim`` fields, per-seed vectors included), each figure's
    ``claim_audit.settle``d as CLAIMS.md shows them, to ``path`` as plain JSON, one entry per
    claim, in figure order; a figure this invocation did not run (not in ``ran``) with no claims in
    ``results_dir`` keeps the entries ``path`` already holds, as CLAIMS.md keeps its rows. Returns
    the claims. A figure whose notebook failed this invocation (``failed``) keeps its entries too,
    whatever it left behind, as its CLAIMS.md rows are kept."""
    import dataclasses
    import json

    from sandbox.analysis.claim_table import from_dict, read_claims
    from sandbox.jobs.store import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous: dict[str, list] = {}
    if path.is_file():
        for entry in json.loads(path.read_text()):
            previous.setdefault(entry["figure"], []).append(entry)
    loaded = []  # per figure: (its fresh claims, or None and the entries kept)
    for figure in figures:
        claims, state, _ = read_claims(record_paths(results_dir, figure.name, fidelity, base_seed)[0])
        fresh = claims and state not in ("missing", "corrupt") and figure.name not in failed
        kept = [] if figure.name in ran and figure.name not in failed else previous.get(figure.name, [])
        loaded.append((claims, None) if fresh else (None, kept))
    settled = settled_claims([c if c is not None else [from_dict(e) for e in kept] for c, kept in loaded],
                             published, starts)
    entries = []
    for (fresh, kept), claims in zip(loaded, settled):
        entries += [dataclasses.asdict(c) for c in claims] if fresh is not None else kept
    text = json.dumps(entries, indent=0, ensure_ascii=False) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))
    return [from_dict(e) for e in entries]

