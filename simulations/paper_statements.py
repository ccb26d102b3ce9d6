"""The papers' own statements beside our claims: the "published" column of ``paper_figures/CLAIMS.md``.

Collected in ``simulations/data/published.csv`` (how: ``simulations/data/PUBLISHED.md``). Only the
papers' abstracts and openings were available offline, so the headline *numbers* the issue asks for
(P1's reversal error at K = 1,000, P2's MNIST errors at D = 1,000, its all-frictions errors and
longest H) are recorded as not stated: the column quotes what the papers say and never a number
read off a plot.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parent / "data" / "published.csv"
NOT_STATED = "its number is not in the text available offline"

#: (figure, claim-name pattern) → (paper, row of published.csv whose statement it tests, note)
MAP = {
    ("prop1-single-context", "dg-lower-*"): ("P1", 1, ""),
    ("prop2-multi-context", "dg-closer-to-ce*"): ("P1", 1, ""),
    ("mnist-learning", "dg-*"): ("P1", 0, NOT_STATED),
    ("mnist-samples-per-image", "dg1-*"): ("P1", 0, NOT_STATED),
    ("mnist-staleness", "dg-beats-is-pg-large-delay"): ("P2", 15, "P2 plots the errors at D = 1,000; " + NOT_STATED),
    ("reversal-learning", "dg-below-*"): ("P1", 0, "P1's reversal error at K = 1,000: " + NOT_STATED),
    ("frictions", "dg-*"): ("P2", 12, ""),
    ("all-frictions", "dg-*"): ("P2", 14, "errors at H = 10 and longest H per method: " + NOT_STATED),
    ("async-signatures", "stale-cos-high"): ("GAC", 58, ""),
    ("async-signatures", "stale-ess-drops"): ("VCPO", 35, ""),
    ("async-signatures", "*restores*"): ("GAC", 59, ""),
    ("llm-staleness", "vcpo-*"): ("VCPO", 39, ""),
    ("llm-staleness", "dg-*"): ("P2", 15, "P2's claim is on MNIST; here an LM under real asynchrony"),
}


def published() -> dict[tuple[str, str], str]:
    """{(figure, claim-name pattern): the paper's statement, quoted, with its source}."""
    table = pd.read_csv(DATA)
    out = {}
    for key, (paper, row, note) in MAP.items():
        entry = table.loc[row]
        if entry["paper"] != paper:
            raise ValueError(f"published.csv row {row} is {entry['paper']}'s, expected {paper}'s")
        text = f"{paper} ({entry['figure']}): {entry['value']}"
        out[key] = text + (f" — {note}" if note else "")
    return out
