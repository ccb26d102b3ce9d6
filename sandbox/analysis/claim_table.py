"""A claim as recorded (``Claim``, read back by ``load_claims``) and the plain-text table
``sandbox reproduce`` prints and ``ClaimBook.table`` returns; ``sandbox.analysis.claims`` makes them."""

from __future__ import annotations

import logging
import math
import os
import textwrap
from dataclasses import dataclass

import numpy as np

from sandbox.core.validation import check_range
from sandbox.jobs.store import read_record

log = logging.getLogger(__name__)

KINDS = ("evidence", "sanity")


@dataclass(frozen=True)
class Claim:
    figure: str
    name: str
    statement: str
    estimate: float
    low: float
    high: float
    passed: bool | None  # None: reported with its interval, not asserted
    detail: str = ""
    kind: str = "evidence"  # 'evidence' | 'sanity'
    n: int = 0  # seeds (0: not a statistic over seeds)
    diverged: int = 0  # seeds whose metric was NaN, scored as the worst value
    side: str = ""  # 'below' | 'above': where the interval must lie relative to ``against`` ('' unknown)
    against: float = 0.0
    test: str = ""  # how it was decided: 'difference', 'threshold', 'equivalent', 'throughout', 'measure' …
    values: tuple = ()  # the per-seed vector the test ran on (paired a − b, the values, or a then b)
    checks: str = ""  # what makes it evidence beyond its test (an equivalence's discrimination checks)
    choice: str = ""  # a window, band, threshold or seed set chosen after data: when, and the seeds it is confirmed on
    arms: tuple = ()  # a difference's per-seed arms (a, b) before subtraction: whether each moved from its start
    band: tuple = ()  # an equivalence's band (low, high): the interval of a − b (or a / b) it must lie inside
    gap: tuple = ()  # (estimate, low, high) of the same test against the other method: the gap the band must undercut
    also: tuple = ()  # reported rows folded into this one (``claim_audit.fold``): (name, statement, estimate, low, high, values)
    label: str = ""  # what the number is where a bare number would mislead (e.g. 'Fisher p'): printed before it

    @property
    def agreement(self) -> str:
        """What the measurement says of the claim's statement, asserted or not: 'supports' (the
        interval lies on the claimed side), 'contradicts' (entirely on the other side) or
        'inconclusive'."""
        if self.side == "below":
            return "supports" if self.high < self.against else ("contradicts" if self.low > self.against else "inconclusive")
        if self.side == "above":
            return "supports" if self.low > self.against else ("contradicts" if self.high < self.against else "inconclusive")
        return "supports" if self.passed else "inconclusive"

    @property
    def interval(self) -> str:
        text = interval_text(self.estimate, self.low, self.high)
        return f"{self.label} = {text}" if self.label and not math.isnan(self.estimate) else text

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "INFO"
        if not self.passed:
            return "FAIL"
        return "CHECK" if self.kind == "sanity" else "PASS"


def interval_text(estimate: float, low: float, high: float) -> str:
    """How a row prints its number: ``estimate [low, high]`` to 4 significant digits, a point alone,
    "no estimate" where there is none (NaN: e.g. a signal's rise with no collapse to precede)."""
    if math.isnan(estimate):
        return "no estimate"
    if estimate == low == high:  # exact: a point, no interval
        return f"{estimate:.4g}"
    return f"{estimate:.4g} [{low:.4g}, {high:.4g}]"


def vector(values) -> tuple:
    """Per-seed values as a flat tuple of floats (what a ``Claim`` stores)."""
    return tuple(float(v) for v in np.asarray(values, dtype=float).ravel())


@dataclass(frozen=True)
class Choice:
    """A window, band, threshold or seed set chosen after its data had been seen (``what``), the
    commit that fixed it and the seeds it was chosen on: such a claim is evidence only on other
    seeds (``ClaimBook.selection`` reports the row that saw the data, ``confirmed`` asserts the other)."""

    what: str
    commit: str
    seen_on: str

    def text(self, confirmed_on: str = "") -> str:
        return (f"{self.what}, chosen at {self.commit} after {self.seen_on} were seen"
                + (f"; confirmed on {confirmed_on}" if confirmed_on else ""))


def from_dict(entry: dict) -> Claim:
    """A ``Claim`` from its JSON form (lists back to tuples; fields older files lack take their defaults)."""
    arms = tuple(tuple(arm) for arm in entry.get("arms", ()))
    also = tuple((name, statement, estimate, low, high, tuple(values))
                 for name, statement, estimate, low, high, values in entry.get("also", ()))
    return Claim(**{**entry, "values": tuple(entry.get("values", ())), "arms": arms,
                    "band": tuple(entry.get("band", ())), "gap": tuple(entry.get("gap", ())), "also": also})


def read_claims(path: str | os.PathLike) -> tuple[list[Claim], str, str]:
    """The claims a ``ClaimBook`` wrote to ``path``, the file's state and why (``read_record``):
    none when it is missing or corrupt (unreadable, truncated, edited); a file whose entries are not
    claims counts as corrupt."""
    data, state, why = read_record(path)
    if state in ("missing", "corrupt"):
        return [], state, why
    try:
        return [from_dict(c) for c in data], state, why
    except (TypeError, ValueError) as err:
        return [], "corrupt", f"not a list of claims: {err}"


def load_claims(path: str | os.PathLike) -> list[Claim]:
    """``read_claims``'s claims (those of other code too); a damaged file is named in one warning
    and gives none."""
    claims, state, why = read_claims(path)
    if state == "corrupt":
        log.warning("ignoring the damaged claims file %s (%s)", path, why)
    return claims


#: column caps of the claim table; the statement takes what is left of ``width``
_CAPS = {"claim": 30, "result": 6, "estimate [CI]": 27, "seeds": 10}


def _seeds_cell(c: Claim) -> str:
    if not c.n:
        return "-" if not c.diverged else f"{c.diverged} NaN"
    return f"{c.n}" + (f" ({c.diverged} div)" if c.diverged else "")


def format_claims(claims: list[Claim], width: int = 120) -> str:
    """A plain-text table no wider than ``width``, grouped by figure: claim, PASS/FAIL/INFO,
    estimate [CI], seeds (and how many diverged), and the statement, wrapped. Evidence comes
    first; sanity checks (CHECK when they hold) are listed apart."""
    check_range("width", width, low=80)
    if not claims:
        return "(no claims)"
    header = [*_CAPS, "statement"]
    widths = [min(cap, max(len(h), *(len(r) for r in col)))
              for h, cap, col in zip(_CAPS, _CAPS.values(),
                                     zip(*[(c.name, c.verdict, c.interval, _seeds_cell(c)) for c in claims]))]
    widths.append(width - sum(widths) - 2 * len(widths) - 2)

    def row(cells: list[str]) -> list[str]:
        wrapped = [textwrap.wrap(cell, w) or [""] for cell, w in zip(cells, widths)]
        return ["  " + "  ".join(part.ljust(w) for part, w in zip(parts, widths)).rstrip()
                for parts in zip(*(col + [""] * (max(map(len, wrapped)) - len(col)) for col in wrapped))]

    lines: list[str] = []
    for kind, title in (("evidence", "Claims (evidence)"), ("sanity", "Sanity checks (true by construction)")):
        chosen = [c for c in claims if c.kind == kind]
        if not chosen:
            continue
        lines += ["" if lines else None, title, *row(header), *row(["-" * w for w in widths])]
        for figure in dict.fromkeys(c.figure for c in chosen):
            lines.append(f"{figure}:")
            for c in (c for c in chosen if c.figure == figure):
                lines += row([c.name, c.verdict, c.interval, _seeds_cell(c), c.statement])
    counts = {k: [c for c in claims if c.kind == k and c.passed is not None] for k in KINDS}
    lines += ["", f"{sum(map(bool, (c.passed for c in counts['evidence'])))}/{len(counts['evidence'])} evidence claims "
              f"passed, {sum(c.passed is None for c in claims)} reported; "
              f"{sum(map(bool, (c.passed for c in counts['sanity'])))}/{len(counts['sanity'])} sanity checks hold"]
    return "\n".join(line for line in lines if line is not None)
