"""Claims: a comparison stated in words, tested with a confidence interval over seeds.

A notebook records every claim its figure shows (``book.less(...)``, ``book.greater(...)``,
``book.close(...)``), then calls ``book.check()``, which raises if any failed. Each claim is also
appended to a JSON file (``$SANDBOX_CLAIMS``) that ``sandbox reproduce`` turns into its table; the
file carries the code that wrote it and a checksum (``sandbox.analysis.store.write_record``), so a
truncated or edited one is detected, never shown.

Two kinds: ``"evidence"`` (a claim about learning, which could have come out otherwise) and
``"sanity"`` (an identity, true by construction: on-policy ESS = 1, a gate's symmetry, a controller
lowering the very quantity it acts on). Sanity checks are shown as CHECK and listed apart.

Diverged seeds (a NaN or infinite metric) count, as the worst value of their metric: with ``worse="high"`` (an
error, a loss) a NaN becomes the highest value among the claim's finite values (and its threshold),
with ``worse="low"`` (a reward) the lowest; without ``worse`` it counts *against the claim* (in
``less(a, b)``: the highest in a, the lowest in b). The claim's detail and the table say how many.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sandbox.analysis.stats import Interval, _confidence, difference_interval, interval
from sandbox.analysis.store import read_record, write_record
from sandbox.core.validation import check_choice, check_range

log = logging.getLogger(__name__)

KINDS = ("evidence", "sanity")
WORSE = (None, "high", "low")


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

    @property
    def interval(self) -> str:
        if self.estimate == self.low == self.high:  # exact: a point, no interval
            return f"{self.estimate:.4g}"
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "INFO"
        if not self.passed:
            return "FAIL"
        return "CHECK" if self.kind == "sanity" else "PASS"


def _seeds(name: str, values) -> np.ndarray:
    """Per-seed values as floats; ±inf (e.g. a threshold never reached) becomes NaN: diverged."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of per-seed values, got shape {x.shape}")
    return np.where(np.isinf(x), np.nan, x)


def score_diverged(samples: list[np.ndarray], against: list[str], worse: str | None,
                   extra: tuple[float, ...] = ()) -> tuple[list[np.ndarray], int]:
    """Replace NaN (diverged) seeds by the worst value: the highest or the lowest finite value among
    ``samples`` and ``extra`` (a threshold); ``worse`` None scores sample i by ``against[i]`` (the
    direction that counts against the claim). Returns the filled samples and the number replaced."""
    check_choice("worse", worse, WORSE)
    if len(against) != len(samples) or not set(against) <= {"high", "low"}:
        raise ValueError(f"against must give 'high' or 'low' for each of the {len(samples)} samples, got {against}")
    pool = np.concatenate([s[~np.isnan(s)] for s in samples] + [np.asarray(extra, dtype=float)])
    count = int(sum(np.isnan(s).sum() for s in samples))
    if count == 0 or pool.size == 0:
        return samples, count
    value = {"high": pool.max(), "low": pool.min()}
    return [np.where(np.isnan(s), value[worse or side], s) for s, side in zip(samples, against)], count


class ClaimBook:
    """Collects a figure's claims; writes them to ``path`` (default ``$SANDBOX_CLAIMS``) as JSON."""

    def __init__(self, figure: str, path: str | os.PathLike | None = None, confidence: float = 0.95) -> None:
        if not isinstance(figure, str) or not figure:
            raise ValueError(f"figure must be a non-empty string, got {figure!r}")
        self.figure = figure
        self.confidence = _confidence(confidence)
        env = os.environ.get("SANDBOX_CLAIMS")
        self.path = Path(path) if path is not None else (Path(env) if env else None)
        self.claims: list[Claim] = []
        if self.path is not None:
            write_record(self.path, [])

    # ------------------------------------------------------------------ recording
    def record(self, claim: Claim) -> Claim:
        check_choice("kind", claim.kind, KINDS)
        if not claim.name or not claim.statement:
            raise ValueError(f"a claim needs a name and a statement, got {claim.name!r} and {claim.statement!r}")
        self.claims.append(claim)
        if self.path is not None:
            write_record(self.path, [dataclasses.asdict(c) for c in self.claims])
        return claim

    def holds(self, name: str, statement: str, interval: Interval, passed: bool, detail: str = "",
              kind: str = "evidence", n: int | None = None, diverged: int = 0) -> Claim:
        """Record a claim decided by the caller from ``interval`` (n defaults to ``interval.n``)."""
        return self.record(Claim(self.figure, name, statement, float(interval.estimate), float(interval.low),
                                 float(interval.high), bool(passed), detail, kind,
                                 int(interval.n if n is None else n), int(diverged)))

    def report(self, claim: Claim) -> Claim:
        """Keep a measured comparison in the table without asserting it (shown as INFO): for a
        spec claim that the current fidelity cannot settle. Pass the Claim a test method returned."""
        self.claims.remove(claim)
        return self.record(dataclasses.replace(claim, passed=None, detail=f"reported, not asserted: {claim.detail}"))

    @staticmethod
    def _diverged_note(samples: dict[str, np.ndarray], worse: str | None) -> str:
        counts = {k: int(np.isnan(v).sum()) for k, v in samples.items()}
        if not sum(counts.values()):
            return ""
        rule = f"scored as the {'highest' if worse == 'high' else 'lowest'} value" if worse else "counted against the claim"
        where = ", ".join(f"{n} of {samples[k].size} in {k}" for k, n in counts.items() if n)
        return f"; diverged (NaN): {where}, {rule}"

    def less(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
             margin: float = 0.0, kind: str = "evidence", worse: str | None = None) -> Claim:
        """statistic(a) < statistic(b) − margin: passes when the CI of the (paired) difference a − b
        lies below −margin (t-interval for paired means, Welch for unpaired ones; see ``stats``).
        ``worse``: which end of the metric a diverged (NaN) seed scores (module docstring)."""
        return self._compare(name, statement, a, b, paired, statistic, margin, kind, worse, sign=-1)

    def greater(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
                margin: float = 0.0, kind: str = "evidence", worse: str | None = None) -> Claim:
        """statistic(a) > statistic(b) + margin (the CI of a − b lies above margin)."""
        return self._compare(name, statement, a, b, paired, statistic, margin, kind, worse, sign=+1)

    def _compare(self, name, statement, a, b, paired, statistic, margin, kind, worse, sign) -> Claim:
        iv, passed, detail, count = self._difference(a, b, paired, statistic, margin, worse, sign)
        return self.holds(name, statement, iv, passed, detail, kind, iv.n, count)

    def _difference(self, a, b, paired, statistic, margin, worse, sign) -> tuple[Interval, bool, str, int]:
        """The interval of a − b with diverged seeds scored, and whether it clears ∓margin."""
        a, b = _seeds("a", a), _seeds("b", b)
        check_range("margin", float(margin), low=0.0)
        if paired and a.shape != b.shape:
            raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
        note = self._diverged_note({"a": a, "b": b}, worse)
        (a, b), count = score_diverged([a, b], ["high", "low"] if sign < 0 else ["low", "high"], worse)
        detail = (f"{'paired ' if paired else ''}{statistic} difference a − b over {a.size} seeds, "
                  f"CI {'below' if sign < 0 else 'above'} {(-margin if sign < 0 else margin) or 0.0:g}")
        if np.isnan(a).all() or np.isnan(b).all():  # every seed diverged: nothing is shown
            return Interval(math.nan, math.nan, math.nan, n=a.size), False, detail + note + "; every seed diverged", count
        iv = difference_interval(a, b, paired, statistic, self.confidence)
        passed = iv.high < -margin if sign < 0 else iv.low > margin
        return dataclasses.replace(iv, n=a.size), bool(passed), f"{detail} ({iv.method}){note}", count

    def less_throughout(self, name: str, statement: str, a, b, columns, paired: bool = True,
                        statistic: str = "mean", kind: str = "evidence", worse: str | None = None) -> Claim:
        """statistic(a) < statistic(b) at *every* column of ``a, b [seeds, len(columns)]`` (e.g. every
        logged step of a window): each column is a ``less`` claim; all must pass. The interval shown
        is the worst column's (the highest upper bound); swap a and b for "greater throughout"."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        columns = list(columns)
        if a.ndim != 2 or a.shape != b.shape or a.shape[1] != len(columns) or not columns:
            raise ValueError(f"a and b must be [seeds, {len(columns)}] arrays (one column per entry of columns), "
                             f"got {a.shape} and {b.shape}")
        results = [self._difference(a[:, j], b[:, j], paired, statistic, 0.0, worse, -1) for j in range(len(columns))]
        worst = max(range(len(columns)), key=lambda j: (not results[j][1], np.nan_to_num(results[j][0].high, nan=np.inf)))
        iv, _, detail, _ = results[worst]
        count = sum(r[3] for r in results)
        detail = f"{sum(r[1] for r in results)} of {len(columns)} columns pass; worst at {columns[worst]}: {detail}"
        return self.holds(name, statement, iv, all(r[1] for r in results), detail, kind, iv.n, count)

    def below(self, name: str, statement: str, values, threshold: float, statistic: str = "mean",
              kind: str = "evidence", worse: str | None = None) -> Claim:
        """statistic(values) < threshold, with its CI entirely below."""
        return self._threshold(name, statement, values, threshold, statistic, kind, worse, sign=-1)

    def above(self, name: str, statement: str, values, threshold: float, statistic: str = "mean",
              kind: str = "evidence", worse: str | None = None) -> Claim:
        """statistic(values) > threshold, with its CI entirely above."""
        return self._threshold(name, statement, values, threshold, statistic, kind, worse, sign=+1)

    def _threshold(self, name, statement, values, threshold, statistic, kind, worse, sign) -> Claim:
        values = _seeds("values", values)
        check_range("threshold", float(threshold))
        note = self._diverged_note({"values": values}, worse)
        (values,), count = score_diverged([values], ["high" if sign < 0 else "low"], worse, (float(threshold),))
        iv = interval(values, statistic, self.confidence)
        passed = iv.high < threshold if sign < 0 else iv.low > threshold
        detail = f"{statistic} {'<' if sign < 0 else '>'} {threshold:g} over {values.size} seeds ({iv.method}){note}"
        return self.holds(name, statement, iv, passed, detail, kind, values.size, count)

    def measure(self, name: str, statement: str, values, worse: str, statistic: str = "mean") -> Claim:
        """A measured quantity (e.g. DG's final error at D = 1,000) with its interval over seeds,
        reported as INFO and not asserted: the number set beside a paper's. ``worse`` ('high' or
        'low') is the end of the metric a diverged seed scores."""
        values = _seeds("values", values)
        if worse not in ("high", "low"):
            raise ValueError(f"worse must be 'high' or 'low' (the end a diverged seed scores), got {worse!r}")
        (values,), count = score_diverged([values], [worse], worse)
        if np.isnan(values).all():
            iv, how = Interval(math.nan, math.nan, math.nan, n=values.size), "every seed diverged"
        else:
            iv = interval(values, statistic, self.confidence)
            how = iv.method
        detail = f"measured, not asserted: {statistic} over {values.size} seeds ({how})"
        return self.record(Claim(self.figure, name, statement, float(iv.estimate), float(iv.low), float(iv.high),
                                 None, detail, "evidence", values.size, count))

    def exact(self, name: str, statement: str, value: float, passed: bool, detail: str = "exact",
              kind: str = "evidence") -> Claim:
        """A claim about a number computed without sampling (its interval is the point itself); a
        NaN value fails."""
        value = float(value)
        return self.holds(name, statement, Interval(value, value, value), bool(passed) and not math.isnan(value),
                          detail, kind, 0)

    def close(self, name: str, statement: str, value, target, tol: float, kind: str = "evidence") -> Claim:
        """max |value − target| ≤ tol (an exact check; the interval is the range of the error). Any
        NaN (e.g. a diverged seed) fails it and is counted."""
        check_range("tol", float(tol), low=0.0)
        err = np.abs(np.asarray(value, dtype=float) - np.asarray(target, dtype=float)).ravel()
        if err.size == 0:
            raise ValueError("close needs at least one value")
        nan = int(np.isnan(err).sum())
        worst = math.inf if nan else float(err.max())
        low = float(np.nanmin(err)) if nan < err.size else math.nan
        detail = f"max abs error ≤ {tol:g}" + (f"; {nan} of {err.size} values are NaN (diverged): fails" if nan else "")
        return self.holds(name, statement, Interval(worst, low, worst), worst <= tol, detail, kind, 0, nan)

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


def read_claims(path: str | os.PathLike) -> tuple[list[Claim], str, str]:
    """The claims a ``ClaimBook`` wrote to ``path``, the file's state and why (``read_record``):
    none when it is missing or corrupt (unreadable, truncated, edited); a file whose entries are not
    claims counts as corrupt."""
    data, state, why = read_record(path)
    if state in ("missing", "corrupt"):
        return [], state, why
    try:
        return [Claim(**c) for c in data], state, why
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
