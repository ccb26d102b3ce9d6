"""Claims: a comparison stated in words, tested with a confidence interval over seeds.

A notebook records every claim its figure shows (``book.less(...)``, ``book.greater(...)``,
``book.close(...)``), then calls ``book.check()``, which raises if any failed. Each claim is also
appended to a JSON file (``$SANDBOX_CLAIMS``) that ``sandbox reproduce`` turns into its table; the
file carries the code that wrote it and a checksum (``sandbox.jobs.store.write_record``), so a
truncated or edited one is detected, never shown.

Two kinds: ``"evidence"`` (a claim about learning, which could have come out otherwise) and
``"sanity"`` (an identity, true by construction: on-policy ESS = 1, a gate's symmetry, a controller
lowering the very quantity it acts on). Sanity checks are shown as CHECK and listed apart. A number
computed without sampling (``exact``, ``close``: a closed form, a theorem, an enumeration) is
always a sanity check: it cannot fail unless the code is wrong, so it is never evidence. One
measurement is one row: an evidence claim whose per-seed inputs repeat another's is refused.

Tests: ``test="t"`` (Student t paired, Welch unpaired) for near-normal metrics; ``test="sign-flip"``
(exact, paired) for bimodal or censored ones — a seed stuck on a wrong answer beside seeds that
solved the task, an H* capped at the grid's top. A paired difference with zero variance gets no
t-interval: it is decided by the sign-flip test. ``equivalent`` is a TOST with a declared band.

Diverged seeds (a NaN or infinite metric) count, as the worst value of their metric: with ``worse="high"`` (an
error, a loss) a NaN becomes the highest value among the claim's finite values (and its threshold),
with ``worse="low"`` (a reward) the lowest; without ``worse`` it counts *against the claim* (in
``less(a, b)``: the highest in a, the lowest in b). The claim's detail and the table say how many.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from sandbox.analysis import claim_audit
from sandbox.analysis.claim_table import KINDS, Choice, Claim, format_claims, load_claims  # noqa: F401 (re-exported)
from sandbox.analysis.claim_table import vector as _vector
from sandbox.analysis.diverged import WORSE, diverged_note, score_diverged  # noqa: F401 (re-exported)
from sandbox.analysis.diverged import per_seed as _seeds
from sandbox.analysis.exact_tests import equivalence_interval, sign_flip_interval
from sandbox.analysis.stats import Interval, _confidence, difference_interval, interval
from sandbox.core.validation import check_choice, check_range
from sandbox.jobs.store import write_record

#: how a comparison over seeds is decided: Student/Welch t (near-normal metrics), or the exact
#: sign-flip test (``sandbox.analysis.exact_tests``: bimodal or censored metrics, any shape)
TESTS = ("t", "sign-flip")


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
        """Keep ``claim``, its class decided by ``claim_audit`` whatever the order of the rows: a CHECK
        the audit cannot verify is reported; an asserted equivalence PASSes only with a gap wider than
        its band; of asserted evidence rows that are one measurement (``claim_audit.same_measurement``)
        one counts — a FAIL before a PASS, else the first — and the others are reported (INFO),
        naming it. A FAIL thus never becomes INFO by being stated after its PASS twin."""
        check_choice("kind", claim.kind, KINDS)
        if not claim.name or not claim.statement:
            raise ValueError(f"a claim needs a name and a statement, got {claim.name!r} and {claim.statement!r}")
        claim = claim_audit.settle([claim])[0] if claim.passed else claim
        if claim.kind == "evidence" and claim.passed is not None:
            twins = [c for c in claim_audit.asserted_evidence(self.claims) if claim_audit.same_measurement(c, claim)]
            if twins and claim.passed is False and all(t.passed for t in twins):  # the FAIL counts, its twins not
                self.claims = [self._twin(c, claim) if any(c is t for t in twins) else c for c in self.claims]
            elif twins:
                claim = self._twin(claim, twins[0])
        self.claims.append(claim)
        if self.path is not None:
            write_record(self.path, [dataclasses.asdict(c) for c in self.claims])
        return claim

    @staticmethod
    def _twin(claim: Claim, counted: Claim) -> Claim:
        why = claim_audit.same_measurement(claim, counted)
        return dataclasses.replace(claim, passed=None, detail=f"reported, not counted again: one measurement with "
                                   f"{counted.name} ({why}): {claim.detail}")

    def fold(self, claim: Claim) -> Claim:
        """One measurement, one row (``claim_audit.fold``): the reported ``claim`` folded into the asserted row
        that counts its measurement and prints its number, which it returns (``claim`` itself when none does)."""
        self.claims, row = claim_audit.fold(self.claims, claim)
        if self.path is not None:
            write_record(self.path, [dataclasses.asdict(c) for c in self.claims])
        return row

    def _pop(self, claim: Claim) -> None:
        """Remove ``claim`` (or the row of its name, when ``record`` has since reported it as a twin)."""
        i = next((i for i, c in enumerate(self.claims) if c is claim), None)
        i = i if i is not None else next(i for i, c in enumerate(self.claims) if c.name == claim.name)
        del self.claims[i]

    def holds(self, name: str, statement: str, interval: Interval, passed: bool | None, detail: str = "",
              kind: str = "evidence", n: int | None = None, diverged: int = 0, side: str = "",
              against: float = 0.0, test: str = "", values=(), checks: str = "", arms=(), band=(),
              gap=(), label: str = "") -> Claim:
        """Record a claim decided by the caller from ``interval`` (n defaults to ``interval.n``);
        ``side`` and ``against`` say where the interval must lie ('below'/'above' the value);
        ``values`` is the per-seed vector the test ran on (the identity check compares them);
        ``arms`` a difference's two per-seed arms, ``band`` and ``gap`` an equivalence's; ``label`` what
        the number is where a bare number would mislead, e.g. 'Fisher p' (``Claim``)."""
        return self.record(Claim(self.figure, name, statement, float(interval.estimate), float(interval.low),
                                 float(interval.high), None if passed is None else bool(passed), detail, kind,
                                 int(interval.n if n is None else n), int(diverged), side, float(against), test,
                                 _vector(values), checks, arms=tuple(_vector(arm) for arm in arms),
                                 band=_vector(band), gap=_vector(gap), label=label))

    def report(self, claim: Claim, why: str = "") -> Claim:
        """Keep a measured comparison in the table without asserting it (shown as INFO): for a
        spec claim that the current fidelity cannot settle. Pass the Claim a test method returned."""
        self._pop(claim)
        because = f" ({why})" if why else ""
        return self.record(dataclasses.replace(claim, passed=None,
                                               detail=f"reported, not asserted{because}: {claim.detail}"))

    def selection(self, claim: Claim, choice: Choice) -> Claim:
        """Report (INFO) a claim computed on the seeds whose data made ``choice``: it cannot count
        as evidence; ``confirmed`` asserts it on other seeds."""
        claim = self.report(claim, f"the choice of {choice.what} was made on these seeds")
        return self._replace(claim, choice=choice.text())

    def confirmed(self, claim: Claim, choice: Choice, seeds: str) -> Claim:
        """Mark ``claim`` as the confirmation of ``choice`` on ``seeds``, never used to make it."""
        return self._replace(claim, choice=choice.text(seeds))

    def _replace(self, claim: Claim, **changes) -> Claim:
        self._pop(claim)
        return self.record(dataclasses.replace(claim, **changes))

    def less(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
             margin: float = 0.0, kind: str = "evidence", worse: str | None = None, test: str = "t") -> Claim:
        """statistic(a) < statistic(b) − margin: passes when the CI of the (paired) difference a − b
        lies below −margin (``test``: t-interval paired, Welch unpaired, or the exact sign-flip
        interval of paired differences; see ``stats``, ``exact_tests``).
        ``worse``: which end of the metric a diverged (NaN) seed scores (module docstring)."""
        return self._compare(name, statement, a, b, paired, statistic, margin, kind, worse, -1, test)

    def greater(self, name: str, statement: str, a, b, paired: bool = True, statistic: str = "mean",
                margin: float = 0.0, kind: str = "evidence", worse: str | None = None, test: str = "t") -> Claim:
        """statistic(a) > statistic(b) + margin (the CI of a − b lies above margin)."""
        return self._compare(name, statement, a, b, paired, statistic, margin, kind, worse, +1, test)

    def _compare(self, name, statement, a, b, paired, statistic, margin, kind, worse, sign, test) -> Claim:
        iv, passed, detail, count, inputs = self._difference(a, b, paired, statistic, margin, worse, sign, test)
        self._one_row(name, kind, ("difference", sign, test, statistic, paired, *inputs))
        a, b = inputs
        return self.holds(name, statement, iv, passed, detail, kind, iv.n, count, "below" if sign < 0 else "above",
                          -margin if sign < 0 else margin, "difference", a - b if paired else np.concatenate([a, b]),
                          arms=(a, b))

    def _one_row(self, name: str, kind: str, key: tuple) -> None:
        """Refuse an evidence claim that repeats the measurement of an earlier one (same inputs)."""
        digest = hash(tuple(x.tobytes() if isinstance(x, np.ndarray) else x for x in key))
        seen = self.__dict__.setdefault("_measurements", {})
        if kind == "evidence" and digest in seen:
            raise ValueError(f"claim {name!r} repeats the measurement of claim {seen[digest]!r} (the same per-seed "
                             "values): one measurement is one row — state both in one claim")
        seen.setdefault(digest, name)

    def _difference(self, a, b, paired, statistic, margin, worse, sign, test="t"):
        """The interval of a − b with diverged seeds scored, whether it clears ∓margin, the detail,
        the number of diverged seeds, and the scored inputs."""
        check_choice("test", test, TESTS)
        a, b = _seeds("a", a), _seeds("b", b)
        check_range("margin", float(margin), low=0.0)
        if paired and a.shape != b.shape:
            raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
        if test == "sign-flip" and (not paired or statistic != "mean"):
            raise ValueError("test='sign-flip' compares paired seeds by their mean difference: use paired=True, "
                             "statistic='mean'")
        note = diverged_note({"a": a, "b": b}, worse)
        (a, b), count = score_diverged([a, b], ["high", "low"] if sign < 0 else ["low", "high"], worse)
        detail = (f"{'paired ' if paired else ''}{statistic} difference a − b over {a.size} seeds, "
                  f"CI {'below' if sign < 0 else 'above'} {(-margin if sign < 0 else margin) or 0.0:g}")
        if np.isnan(a).all() or np.isnan(b).all():  # every seed diverged: nothing is shown
            nan = Interval(math.nan, math.nan, math.nan, n=a.size)
            return nan, False, detail + note + "; every seed diverged", count, (a, b)
        if test == "t" and paired and statistic == "mean" and np.ptp(a - b) == 0 and a.size > 1:
            test, note = "sign-flip", note + "; zero variance: no t-interval, decided by the exact sign-flip test"
        if test == "sign-flip":
            iv = sign_flip_interval(a - b, self.confidence)
        else:
            iv = difference_interval(a, b, paired, statistic, self.confidence)
        passed = iv.high < -margin if sign < 0 else iv.low > margin
        return dataclasses.replace(iv, n=a.size), bool(passed), f"{detail} ({iv.method}){note}", count, (a, b)

    def less_throughout(self, name: str, statement: str, a, b, columns, paired: bool = True,
                        statistic: str = "mean", kind: str = "evidence", worse: str | None = None,
                        test: str = "t") -> Claim:
        """statistic(a) < statistic(b) at *every* column of ``a, b [seeds, len(columns)]`` (e.g. every
        logged step of a window): each column is a ``less`` claim; all must pass. The interval shown
        is the worst column's (the highest upper bound); swap a and b for "greater throughout"."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        columns = list(columns)
        if a.ndim != 2 or a.shape != b.shape or a.shape[1] != len(columns) or not columns:
            raise ValueError(f"a and b must be [seeds, {len(columns)}] arrays (one column per entry of columns), "
                             f"got {a.shape} and {b.shape}")
        results = [self._difference(a[:, j], b[:, j], paired, statistic, 0.0, worse, -1, test)
                   for j in range(len(columns))]
        worst = max(range(len(columns)), key=lambda j: (not results[j][1], np.nan_to_num(results[j][0].high, nan=np.inf)))
        iv, _, detail, _, _ = results[worst]
        self._one_row(name, kind, ("throughout", test, statistic, paired, a, b))
        count = sum(r[3] for r in results)
        detail = f"{sum(r[1] for r in results)} of {len(columns)} columns pass; worst at {columns[worst]}: {detail}"
        scored = np.stack([np.subtract(*r[4]) if paired else np.concatenate(r[4]) for r in results], axis=1)
        return self.holds(name, statement, iv, all(r[1] for r in results), detail, kind, iv.n, count, "below", 0.0,
                          "throughout", scored.ravel())

    def below(self, name: str, statement: str, values, threshold: float, statistic: str = "mean",
              kind: str = "evidence", worse: str | None = None, test: str = "t") -> Claim:
        """statistic(values) < threshold, with its CI entirely below."""
        return self._threshold(name, statement, values, threshold, statistic, kind, worse, -1, test)

    def above(self, name: str, statement: str, values, threshold: float, statistic: str = "mean",
              kind: str = "evidence", worse: str | None = None, test: str = "t") -> Claim:
        """statistic(values) > threshold, with its CI entirely above."""
        return self._threshold(name, statement, values, threshold, statistic, kind, worse, +1, test)

    def _threshold(self, name, statement, values, threshold, statistic, kind, worse, sign, test) -> Claim:
        check_choice("test", test, TESTS)
        values = _seeds("values", values)
        check_range("threshold", float(threshold))
        note = diverged_note({"values": values}, worse)
        (values,), count = score_diverged([values], ["high" if sign < 0 else "low"], worse, (float(threshold),))
        self._one_row(name, kind, ("threshold", sign, test, statistic, float(threshold), values))
        if test == "t" and statistic == "mean" and values.size > 1 and np.ptp(values) == 0:
            test, note = "sign-flip", note + "; zero variance: no t-interval, decided by the exact sign-flip test"
        if test == "sign-flip":
            if statistic != "mean":
                raise ValueError("test='sign-flip' tests the mean: use statistic='mean'")
            shifted = sign_flip_interval(values - threshold, self.confidence)
            iv = dataclasses.replace(shifted, estimate=shifted.estimate + threshold, low=shifted.low + threshold,
                                     high=shifted.high + threshold)
        else:
            iv = interval(values, statistic, self.confidence)
        passed = iv.high < threshold if sign < 0 else iv.low > threshold
        detail = f"{statistic} {'<' if sign < 0 else '>'} {threshold:g} over {values.size} seeds ({iv.method}){note}"
        return self.holds(name, statement, iv, passed, detail, kind, values.size, count, "below" if sign < 0 else "above",
                          float(threshold), "threshold", values)

    def equivalent(self, name: str, statement: str, a, b, band: float, paired: bool = False, log: bool = False,
                   alpha: float = 0.05, worse: str | None = None, trivial: float | None = None,
                   margin: float | None = None, other=None, other_label: str = "the other method",
                   test: str = "t") -> Claim:
        """TOST: mean(a) and mean(b) are equivalent within ±``band`` — the (1 − 2α) interval of
        mean(a) − mean(b) (paired t, or Welch) lies inside (−band, band). With ``log`` the values
        are compared on the log scale and the band is a factor: the interval of the ratio of
        geometric means lies inside (1/band, band). The band must be declared before the data.
        ``test='sign-flip'`` (paired only) uses the exact (1 − 2α) sign-flip interval of a − b, for
        bimodal or censored metrics.

        It is evidence only when it can tell methods apart (``claim_audit``): both samples are
        informative — each mean's interval lies beyond ``trivial`` (chance reward, the untrained
        error) by ``margin``, on the side away from ``worse`` — and the same test of ``a`` against
        ``other`` (the other method's data, ``other_label``) fails. Otherwise, or without those
        three arguments, the row is reported (INFO) with the reason — unless its interval lies
        wholly outside the band: a difference larger than the band is shown, and the row FAILs."""
        check_range("band", float(band), low=1.0 if log else 0.0, low_open=True)
        check_range("alpha", float(alpha), low=0.0, high=0.5, low_open=True, high_open=True)
        check_choice("test", test, TESTS)
        if test == "sign-flip" and (not paired or log):
            raise ValueError("test='sign-flip' compares paired seeds on the raw scale: use paired=True, log=False")
        a, b = _seeds("a", a), _seeds("b", b)
        note = diverged_note({"a": a, "b": b}, worse)
        # a diverged seed scores the worst value, which can only widen the interval: against equivalence
        (a, b), count = score_diverged([a, b], ["high", "low"], worse)
        self._one_row(name, "evidence", ("equivalent", float(band), paired, log, a, b))
        passed, iv, band_text = self._tost(a, b, band, paired, log, alpha, test)
        detail = (f"TOST at α = {alpha:g}: {1 - 2 * alpha:.0%} {iv.method} interval of a − b inside {band_text}, the "
                  f"band declared before the data; {a.size} vs {b.size} seeds{note}")
        checks, refused, gap = self._discrimination(a, b, band, paired, log, alpha, worse, trivial, margin, other,
                                                    other_label, test)
        low, high = (1 / band, band) if log else (-band, band)
        if iv.low >= high or iv.high <= low:  # shown apart by more than the band: a difference needs no discrimination
            checks.append(f"shown apart: the interval lies outside the band{' (' + '; '.join(refused) + ')' if refused else ''}")
        elif refused:
            passed, detail = None, f"not evidence ({'; '.join(refused)}): {detail}"
        return self.holds(name, statement, iv, passed, detail, "evidence", min(a.size, b.size), count,
                          test="equivalent", values=np.concatenate([a, b]), checks="; ".join(checks), band=(low, high),
                          gap=gap, arms=(a, b))

    @staticmethod
    def _tost(a, b, band, paired, log, alpha, test="t") -> tuple[bool, Interval, str]:
        if log:
            if (a <= 0).any() or (b <= 0).any():
                raise ValueError("equivalent(log=True) needs positive values (a ratio band)")
            iv = equivalence_interval(np.log(a), np.log(b), paired, alpha)
            iv = dataclasses.replace(iv, estimate=math.exp(iv.estimate), low=math.exp(iv.low), high=math.exp(iv.high))
            return bool(1 / band < iv.low and iv.high < band), iv, f"(1/{band:g}, {band:g}) (ratio of geometric means)"
        iv = sign_flip_interval(a - b, 1 - 2 * alpha) if test == "sign-flip" else equivalence_interval(a, b, paired, alpha)
        return bool(-band < iv.low and iv.high < band), iv, f"(−{band:g}, {band:g})"

    def _discrimination(self, a, b, band, paired, log, alpha, worse, trivial, margin, other, other_label, test):
        """The equivalence's two discrimination checks: what holds (``checks``), what does not
        (``refused``) and the gap — the same test against ``other`` — that must lie wholly outside the
        band: the band must be narrower than a gap these data show, not merely fail a noisier test."""
        if trivial is None or margin is None or other is None:
            return [], ["no discrimination check declared: trivial value, margin and the other method's data"], ()
        check_range("margin", float(margin), low=0.0)
        checks, refused = [], []
        for label, x in (("a", a), ("b", b)):
            iv = interval(x, "mean", self.confidence)
            if worse == "low":
                ok, where = iv.low > trivial + margin, f"above {trivial + margin:g}"
            elif worse == "high":
                ok, where = iv.high < trivial - margin, f"below {trivial - margin:g}"
            else:
                ok, where = iv.low > trivial + margin or iv.high < trivial - margin, f"outside {trivial:g} ± {margin:g}"
            text = f"mean of {label} {iv} {'lies' if ok else 'does not lie'} {where} (trivial value {trivial:g})"
            (checks if ok else refused).append(("informative: " if ok else "not informative: ") + text)
        other = _seeds("other", other)
        (other,), _ = score_diverged([other], ["low" if worse == "low" else "high"], worse)
        same_seeds = paired and other.shape == a.shape  # the other method on the same seeds: paired too
        _, iv, _ = self._tost(a, other, band, same_seeds, log, alpha, test if same_seeds else "t")
        low, high = (1 / band, band) if log else (-band, band)
        text = f"the same test against {other_label} gives {iv}"
        if iv.low >= high or iv.high <= low:
            checks.append(f"discriminates: {text}, wholly outside the band: a gap wider than the band")
        else:
            refused.append(f"cannot discriminate: {text}, not wholly outside the band")
        return checks, refused, (iv.estimate, iv.low, iv.high)

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
        elif np.ptp(values) == 0:  # no interval from zero variance
            iv, how = Interval(float(values[0]), float(values[0]), float(values[0]), n=values.size), \
                f"every seed gives {values[0]:g}: no interval"
        else:
            iv = interval(values, statistic, self.confidence)
            how = iv.method
        detail = f"measured, not asserted: {statistic} over {values.size} seeds ({how})"
        return self.record(Claim(self.figure, name, statement, float(iv.estimate), float(iv.low), float(iv.high),
                                 None, detail, "evidence", values.size, count, test="measure", values=_vector(values)))

    def exact(self, name: str, statement: str, value: float, passed: bool, detail: str = "exact") -> Claim:
        """A sanity check on a number computed without sampling (its interval is the point itself):
        a closed form, a theorem, an enumeration cannot fail unless the code is wrong, so it is never
        evidence. A NaN value fails."""
        value = float(value)
        return self.holds(name, statement, Interval(value, value, value), bool(passed) and not math.isnan(value),
                          detail, "sanity", 0)

    def close(self, name: str, statement: str, value, target, tol: float) -> Claim:
        """Sanity check: max |value − target| ≤ tol (an identity checked numerically; the interval is
        the range of the error). Any NaN (e.g. a diverged seed) fails it and is counted."""
        check_range("tol", float(tol), low=0.0)
        err = np.abs(np.asarray(value, dtype=float) - np.asarray(target, dtype=float)).ravel()
        if err.size == 0:
            raise ValueError("close needs at least one value")
        nan = int(np.isnan(err).sum())
        worst = math.inf if nan else float(err.max())
        low = float(np.nanmin(err)) if nan < err.size else math.nan
        detail = f"max abs error ≤ {tol:g}" + (f"; {nan} of {err.size} values are NaN (diverged): fails" if nan else "")
        return self.holds(name, statement, Interval(worst, low, worst), worst <= tol, detail, "sanity", 0, nan)

    # ------------------------------------------------------------------ verdict
    @property
    def failed(self) -> list[Claim]:
        return [c for c in self.claims if c.passed is False]

    def table(self) -> str:
        return format_claims(self.claims)

    def check(self, require_asserted: bool = True) -> None:
        """Raise AssertionError naming every failed claim (call at the end of a notebook); a figure
        must assert at least one claim unless it is descriptive (``require_asserted=False``: every
        claim reported, e.g. a map whose cells no claim was stated for beforehand)."""
        if not self.claims:
            raise AssertionError(f"{self.figure}: no claims were recorded")
        defects = claim_audit.audit(self.claims)
        if defects:  # a defect of the notebook, not a result: it raises before the verdict
            raise ValueError(f"{self.figure}: claims that are not evidence as stated:\n  " + "\n  ".join(defects))
        if require_asserted and not any(c.passed is not None for c in self.claims):
            raise AssertionError(f"{self.figure}: no claims were asserted")
        if self.failed:
            lines = "\n".join(f"  {c.name}: {c.statement} — {c.interval} ({c.detail})" for c in self.failed)
            raise AssertionError(f"{self.figure}: {len(self.failed)} claim(s) failed:\n{lines}")
