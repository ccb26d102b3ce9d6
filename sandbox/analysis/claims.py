"""Claims: a comparison stated in words, tested with a confidence interval over seeds.

A notebook records every claim its figure shows (``book.less(...)``, ``book.greater(...)``,
``book.close(...)``), then calls ``book.check()``, which raises if any failed. Each claim is also
appended to a JSON file (``$SANDBOX_CLAIMS``) that ``sandbox reproduce`` turns into its table.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sandbox.analysis.stats import Interval, bootstrap_ci, paired_difference_ci


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

    @property
    def interval(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


class ClaimBook:
    """Collects a figure's claims; writes them to ``path`` (default ``$SANDBOX_CLAIMS``) as JSON."""

    def __init__(self, figure: str, path: str | os.PathLike | None = None, confidence: float = 0.95) -> None:
        self.figure = figure
        self.confidence = confidence
        env = os.environ.get("SANDBOX_CLAIMS")
        self.path = Path(path) if path is not None else (Path(env) if env else None)
        self.claims: list[Claim] = []
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("[]")

    # ------------------------------------------------------------------ recording
    def record(self, claim: Claim) -> Claim:
        self.claims.append(claim)
        if self.path is not None:
            self.path.write_text(json.dumps([dataclasses.asdict(c) for c in self.claims], indent=1))
        return claim

    def holds(self, name: str, statement: str, interval: Interval, passed: bool, detail: str = "") -> Claim:
        return self.record(Claim(self.figure, name, statement, interval.estimate, interval.low, interval.high,
                                 bool(passed), detail))

    def report(self, claim: Claim) -> Claim:
        """Keep a measured comparison in the table without asserting it (shown as INFO): for a
        spec claim that the current fidelity cannot settle. Pass the Claim a test method returned."""
        self.claims.remove(claim)
        return self.record(Claim(claim.figure, claim.name, claim.statement, claim.estimate, claim.low, claim.high,
                                 None, f"reported, not asserted: {claim.detail}"))

    def less(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
             margin: float = 0.0) -> Claim:
        """statistic(a) < statistic(b) − margin: passes when the CI of the (paired) difference a − b
        lies below −margin."""
        if paired:
            iv = paired_difference_ci(a, b, statistic, self.confidence)
        else:
            ia, ib = bootstrap_ci(a, statistic, self.confidence), bootstrap_ci(b, statistic, self.confidence)
            iv = Interval(ia.estimate - ib.estimate, ia.low - ib.high, ia.high - ib.low, self.confidence)
        detail = f"{'paired ' if paired else ''}{statistic} difference a − b over {len(np.ravel(a))} seeds"
        return self.holds(name, statement, iv, iv.high < -margin, detail)

    def greater(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
                margin: float = 0.0) -> Claim:
        """statistic(a) > statistic(b) + margin (the CI of a − b lies above margin)."""
        claim = self.less(name, statement, b, a, paired, statistic, margin)
        self.claims.pop()
        iv = Interval(-claim.estimate, -claim.high, -claim.low)
        return self.holds(name, statement, iv, iv.low > margin, claim.detail.replace("a − b", "a − b (a > b)"))

    def below(self, name: str, statement: str, values, threshold: float, statistic: str = "mean") -> Claim:
        """statistic(values) < threshold, with its CI entirely below."""
        iv = bootstrap_ci(values, statistic, self.confidence)
        return self.holds(name, statement, iv, iv.high < threshold, f"{statistic} < {threshold:g}")

    def above(self, name: str, statement: str, values, threshold: float, statistic: str = "mean") -> Claim:
        """statistic(values) > threshold, with its CI entirely above."""
        iv = bootstrap_ci(values, statistic, self.confidence)
        return self.holds(name, statement, iv, iv.low > threshold, f"{statistic} > {threshold:g}")

    def exact(self, name: str, statement: str, value: float, passed: bool, detail: str = "exact") -> Claim:
        """A claim about a number computed without sampling (its interval is the point itself)."""
        value = float(value)
        return self.holds(name, statement, Interval(value, value, value), passed, detail)

    def close(self, name: str, statement: str, value, target, tol: float) -> Claim:
        """max |value − target| ≤ tol (an exact check; the interval is the range of the error)."""
        err = np.abs(np.asarray(value, dtype=float) - np.asarray(target, dtype=float))
        worst = float(np.nanmax(err)) if err.size else math.nan
        iv = Interval(worst, float(np.nanmin(err)) if err.size else math.nan, worst)
        return self.holds(name, statement, iv, bool(worst <= tol), f"max abs error ≤ {tol:g}")

    # ------------------------------------------------------------------ verdict
    @property
    def failed(self) -> list[Claim]:
        return [c for c in self.claims if c.passed is False]

    def table(self) -> str:
        return format_claims(self.claims)

    def check(self) -> None:
        """Raise AssertionError naming every failed claim (call at the end of a notebook)."""
        if not any(c.passed is not None for c in self.claims):
            raise AssertionError(f"{self.figure}: no claims were asserted")
        if self.failed:
            lines = "\n".join(f"  {c.name}: {c.statement} — {c.interval} ({c.detail})" for c in self.failed)
            raise AssertionError(f"{self.figure}: {len(self.failed)} claim(s) failed:\n{lines}")


def load_claims(path: str | os.PathLike) -> list[Claim]:
    p = Path(path)
    if not p.is_file():
        return []
    return [Claim(**c) for c in json.loads(p.read_text())]


def format_claims(claims: list[Claim]) -> str:
    """A plain-text table: figure, claim, PASS/FAIL, estimate [CI]."""
    if not claims:
        return "(no claims)"
    verdict = {True: "PASS", False: "FAIL", None: "INFO"}
    rows = [(c.figure, c.name, verdict[c.passed], c.interval, c.statement) for c in claims]
    widths = [max(len(r[i]) for r in rows + [("figure", "claim", "result", "estimate [95% CI]", "statement")])
              for i in range(4)]
    header = ("figure", "claim", "result", "estimate [95% CI]", "statement")
    lines = ["  ".join(h.ljust(w) for h, w in zip(header[:4], widths)) + "  " + header[4]]
    lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 9)
    for r in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r[:4], widths)) + "  " + r[4])
    return "\n".join(lines)
