"""The counts of the committed claim table on the pages that show them (the README's front page,
docs/figures.md): a generated block between two markers, rewritten from ``paper_figures/CLAIMS.md``
by ``python -m sandbox.analysis.claim_counts`` and checked by ``tests/test_committed_claims.py``."""

from __future__ import annotations

import re
from pathlib import Path

_SPLIT = re.compile(r"(?<!\\)\|")  # a table cell boundary ("|" not escaped as "\|")


def cells(row: str) -> list[str]:
    return [c.strip() for c in _SPLIT.split(row.strip())[1:-1]]


def section(text: str, title: str) -> list[str]:
    """The table rows (after the header and its rule) of the section ``## title``."""
    lines = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].splitlines() if f"## {title}\n" in text else []
    rows = [line for line in lines if line.startswith("|")]
    return rows[2:]


#: the markers of a generated block of claim counts (README, docs/figures.md): ``refresh_counts`` rewrites it
COUNTS_BEGIN = ("<!-- claim-counts: generated from paper_figures/CLAIMS.md by `python -m sandbox.analysis.claim_counts`; "
                "do not edit -->")
COUNTS_END = "<!-- /claim-counts -->"


def claim_counts(text: str) -> dict[str, dict[tuple[str, str], int]]:
    """Per figure, {(kind, verdict): rows} of a CLAIMS.md's claims table (``text``)."""
    out: dict[str, dict[tuple[str, str], int]] = {}
    for row in section(text, "Claims"):
        parts = cells(row)
        figure, kind, verdict = parts[0].strip("`"), parts[2], parts[6].strip("*")
        counts = out.setdefault(figure, {})
        counts[(kind, verdict)] = counts.get((kind, verdict), 0) + 1
    return out


def counts_block(text: str, claims_link: str, per_figure: bool = False) -> str:
    """The generated block: the evidence and sanity counts of a CLAIMS.md (``text``), a one-line
    reading and a link to its FAILs (``claims_link``: the path of CLAIMS.md from the page); with
    ``per_figure`` a table of each figure's counts."""
    figures = claim_counts(text)
    total = {k: sum(c.get(k, 0) for c in figures.values())
             for k in [(kind, v) for kind in ("evidence", "sanity") for v in ("PASS", "FAIL", "INFO", "CHECK")]}
    passed, failed, info = (total[("evidence", v)] for v in ("PASS", "FAIL", "INFO"))
    asserted = passed + failed
    lines = [COUNTS_BEGIN,
             f"**Evidence at paper fidelity:** {passed} PASS, {failed} FAIL, {info} INFO (reported, not asserted); "
             f"sanity checks: {total[('sanity', 'CHECK')]} CHECK, {total[('sanity', 'FAIL')]} FAIL, "
             f"{total[('sanity', 'INFO')]} INFO.",
             f"Reading: {failed} of the {asserted} asserted claims about learning "
             f"({round(100 * failed / asserted) if asserted else 0}%) FAIL: claims stated before the runs that this "
             f"tier's data do not show, each with its cause beside it ([the FAILs]({claims_link}#claims), marked "
             "**FAIL**).", ""]
    if per_figure:
        columns = [("evidence", "PASS"), ("evidence", "FAIL"), ("evidence", "INFO"), ("sanity", "CHECK"),
                   ("sanity", "FAIL"), ("sanity", "INFO")]
        lines += ["| figure | " + " | ".join(f"{kind} {verdict}" for kind, verdict in columns) + " |",
                  "|---" * (len(columns) + 1) + "|"]
        lines += [f"| `{f}` | " + " | ".join(str(c.get(k, 0)) for k in columns) + " |" for f, c in figures.items()]
        lines.append("")
    return "\n".join([*lines, COUNTS_END])


def refresh_counts(page: str, text: str, claims_link: str, per_figure: bool = False) -> str:
    """``page`` with its one generated block of claim counts rewritten from CLAIMS.md (``text``)."""
    if page.count(COUNTS_BEGIN) != 1 or page.count(COUNTS_END) != 1:
        raise ValueError(f"a page must hold exactly one block between {COUNTS_BEGIN!r} and {COUNTS_END!r}")
    head, rest = page.split(COUNTS_BEGIN, 1)
    return head + counts_block(text, claims_link, per_figure) + rest.split(COUNTS_END, 1)[1]


#: the pages that show the committed counts: path → (CLAIMS.md's path from it, with the per-figure table)
COUNT_PAGES = {"README.md": ("paper_figures/CLAIMS.md", False), "docs/figures.md": ("../paper_figures/CLAIMS.md", True)}


def main() -> int:
    """``python -m sandbox.analysis.claim_counts``: rewrite the counts of ``COUNT_PAGES`` from paper_figures/CLAIMS.md."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "paper_figures" / "CLAIMS.md").read_text()
    for page, (link, per_figure) in COUNT_PAGES.items():
        path = root / page
        path.write_text(refresh_counts(path.read_text(), text, link, per_figure))
        print(f"{page}: claim counts rewritten from paper_figures/CLAIMS.md")
    return 0


__all__ = ["COUNTS_BEGIN", "COUNTS_END", "COUNT_PAGES", "cells", "claim_counts", "counts_block", "refresh_counts",
           "section"]


if __name__ == "__main__":
    raise SystemExit(main())
