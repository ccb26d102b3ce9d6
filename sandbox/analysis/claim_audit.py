"""What makes a claim row evidence beyond its own test: the rules every row of a claim table must
pass, whatever its label, and ``settle``, which gives each row the class those rules allow.

* **Identity** (``claim_identity.same_vectors``: agreement — one constant in every seed of both
  included —, an affine map robust to one seed, a monotone map, a subset of seeds): two asserted evidence rows that are one measurement must be
  one row; an asserted evidence row that is one measurement with a sanity row, or with a row an
  identity implies, is that identity restated (a Cauchy–Schwarz bound under a new name).
* **Order** (``hidden_fail_violations``): of rows that are one measurement, a FAIL counts before a
  PASS (``ClaimBook.record``), so a reported row whose own interval would FAIL beside an asserted
  PASS twin is a FAIL hidden by the order the rows were stated in.
* **Discrimination by magnitude**: an asserted equivalence or non-inferiority PASSes only if its
  band is narrower than a gap the same data show elsewhere — ``gap``, the same test against the
  other method, lies wholly outside the band — not merely because that test failed (a noisier
  comparison arm fails any TOST). A difference claim with a declared start (``starts``: chance
  error, the untrained value) PASSes only if the arm it favours moved from it by the declared
  margin: two arms at chance are not shown apart by a method (a FAIL stays a FAIL).
* **Sanity**: a CHECK row must be an identity or closed form the audit can verify: a number
  computed without sampling (n = 0) that is exact (a point) or within its stated tolerance
  ("≤ TOL" in its detail). A statistic over seeds is never a CHECK.
* **Confirmation**: a row whose window, band, threshold or seed set was chosen after its data
  (``choice``) is asserted only on seeds never used to make the choice; ``posthoc`` lists the
  choices a figure registry declares, each of which must appear as an asserted confirmation row.
* **Identities**: ``identities`` lists, per figure, the claims an identity or a theorem implies
  (claim-name patterns); such a row must be a sanity check, never evidence.
* **Folds** (``fold``): a reported row folded into another — one measurement, one row — must be one
  measurement with it (``same_measurement``) and print the same number.
* **Reported rows**: a reported row that tests a paper's statement (``published``) and whose
  interval decides it — supports or contradicts — is asserted, unless its measurement is counted by
  an asserted row, its choice was made on its data, or its arms never moved.

``audit`` returns one line per violation; ``sandbox reproduce`` prints them and a test enforces that
the committed paper-tier table has none. ``settle`` applies the remedies (a row becomes INFO, or a
decided INFO row is asserted), independently of the order of the rows.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

import numpy as np

from sandbox.analysis.claim_identity import (
    IDENTITY_CORR,
    IDENTITY_MIN_N,
    IDENTITY_RTOL,
    same_vectors,
)
from sandbox.analysis.claim_table import Claim
from sandbox.analysis.stats import interval

#: what an asserted equivalence row's ``checks`` must record
DISCRIMINATION_CHECKS = ("informative:", "discriminates:")
#: tests decided by a band (equivalence) or a margin (non-inferiority)
BAND_TESTS = ("equivalent", "case:noninferior")
#: a tolerance stated in a sanity row's detail ("max abs error ≤ 1e-12")
TOLERANCE = re.compile(r"≤\s*([-+]?\d[\d.]*(?:[eE][-+]?\d+)?)")

Starts = Mapping[tuple[str, str], tuple[float, float, str]]


def _match(rules: Mapping | None, c: Claim):
    return next((v for (f, p), v in (rules or {}).items() if f == c.figure and fnmatchcase(c.name, p)), None)


def asserted_evidence(claims: Iterable[Claim]) -> list[Claim]:
    return [c for c in claims if c.kind == "evidence" and c.passed is not None]


def segments(c: Claim) -> tuple:
    """The per-seed vectors a row measures: the two arms of an unpaired comparison (its values are
    the arms side by side), else its one vector."""
    if len(c.arms) == 2 and len(c.values) == len(c.arms[0]) + len(c.arms[1]):
        return tuple(c.arms)
    return (c.values,)


def same_measurement(a: Claim, b: Claim) -> str:
    """Why rows ``a`` and ``b`` are one measurement ('' if not): ``same_vectors`` of their per-seed
    vectors, arm by arm for two unpaired comparisons (both arms must be one measurement; sharing one
    arm is not enough). One arm of an unpaired comparison tested alone is a different hypothesis.
    Two constant vectors that agree are one measurement unless a row's estimate is undefined (NaN:
    it measured nothing, e.g. no collapse in either arm of a contrast)."""
    sa, sb = segments(a), segments(b)
    if len(sa) != len(sb):
        return ""
    constants = bool(np.isfinite(a.estimate) and np.isfinite(b.estimate))
    if len(sa) == 1:
        return same_vectors(a.values, b.values, constants)
    for order in (sb, sb[::-1]):
        whys = [same_vectors(x, y, constants) for x, y in zip(sa, order)]
        if all(whys):
            return "arm by arm: " + "; ".join(whys)
    return ""


def would_pass(c: Claim) -> bool | None:
    """The verdict a row's interval gives its statement if asserted (None: it states no side)."""
    return None if not c.side else c.agreement == "supports"


def unverifiable(c: Claim) -> str:
    """Why a sanity row cannot be a CHECK the audit verifies ('' when it can)."""
    if c.n:
        return f"a statistic over {c.n} seeds, not an identity the audit can verify"
    if c.estimate == c.low == c.high:
        return ""  # a number computed without sampling, checked exactly
    match = TOLERANCE.search(c.detail or "")
    if not match:
        return "an interval with no stated tolerance, not an identity the audit can verify"
    if not c.high <= float(match.group(1)):
        return f"its worst value {c.high:g} exceeds its stated tolerance {match.group(1)}"
    return ""


def undiscriminating(c: Claim) -> str:
    """Why an equivalence or non-inferiority row cannot PASS as evidence ('' when it can): its band
    must be narrower than the gap the same test shows against the other method."""
    if not (c.band and c.gap):
        return "no gap recorded beside its band: nothing shows the band could tell two methods apart"
    (low, high), (_, gap_low, gap_high) = c.band, c.gap
    if gap_low >= high or gap_high <= low:
        return ""
    return (f"the gap the same data show ({gap_low:.4g} to {gap_high:.4g}) is not wholly outside its band "
            f"({low:.4g}, {high:.4g}): the band is not narrower than a gap these data show")


def unmoved(c: Claim, starts: Starts | None) -> str:
    """Why a difference row does not show a method at work ('' when it does, or no start is
    declared): the arm it favours (``a``: the one stated lower, or higher) must have moved from the
    start — its 95% interval of the mean beyond the start by the margin. Arms that both sit at chance
    are not told apart by a method; a method that learned beside a baseline that did not is."""
    rule = _match(starts, c) if c.test == "difference" else None
    if rule is None:
        return ""
    start, margin, what = rule
    if len(c.arms) != 2:
        return f"its arms are not recorded, so nothing shows the favoured one moved from {what} ({start:g})"
    x = np.asarray(c.arms[0], dtype=float)
    x = x[np.isfinite(x)]
    iv = interval(x, "mean") if x.size > 1 and np.ptp(x) > 0 else None
    low, high = (iv.low, iv.high) if iv else (float(np.mean(x)),) * 2 if x.size else (np.nan, np.nan)
    if low > start + margin or high < start - margin:
        return ""
    return (f"favoured arm ({np.mean(x):.3g} [{low:.3g}, {high:.3g}]) did not move from {what} ({start:g}) by "
            f"{margin:g}: a method that never learned is not shown to beat another")


def identity_violations(claims: Iterable[Claim], identities: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Pairs of asserted evidence rows that are one measurement, and asserted evidence rows that are
    one measurement with a sanity row or a row an identity implies."""
    claims = list(claims)
    rows, out = asserted_evidence(claims), []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            why = same_measurement(a, b)
            if why:
                out.append(f"{a.figure}/{a.name} and {b.figure}/{b.name} are one measurement ({why}): "
                           "state them in one row, or make the implied one a sanity check")
    implied = [c for c in claims if c.kind == "sanity" or any(fnmatchcase(c.name, p)
                                                              for p in (identities or {}).get(c.figure, ()))]
    seen = [c for c in claims if c.choice and "confirmed on" not in c.choice]
    for a in rows:
        for b in implied + seen:
            why = b is not a and same_measurement(a, b)
            if why:
                what = ("holds by construction: an identity is a sanity check, never evidence" if b in implied else
                        "saw the data that made its choice: assert the choice on seeds never used to make it")
                out.append(f"{a.figure}/{a.name} restates {b.figure}/{b.name}, which {what} ({why})")
    return out


def hidden_fail_violations(claims: Iterable[Claim]) -> list[str]:
    """Reported rows whose own interval would FAIL beside an asserted PASS row of the same measurement."""
    claims = list(claims)
    passes = [c for c in asserted_evidence(claims) if c.passed]
    return [f"{c.figure}/{c.name}: reported, but its interval would FAIL and it is one measurement with the asserted "
            f"PASS {t.figure}/{t.name}: a FAIL counts before a PASS, whatever the order"
            for c in claims if c.kind == "evidence" and c.passed is None and would_pass(c) is False
            for t in passes if same_measurement(c, t)]


def discrimination_violations(claims: Iterable[Claim]) -> list[str]:
    """Asserted equivalences without their checks, or PASSing with a band no narrower than the gap."""
    out = []
    for c in asserted_evidence(claims):
        if c.test not in BAND_TESTS:
            continue
        if c.passed and undiscriminating(c):
            out.append(f"{c.figure}/{c.name}: an asserted equivalence PASSes with {undiscriminating(c)}")
        elif c.test == "equivalent" and not all(k in c.checks for k in DISCRIMINATION_CHECKS) \
                and not (c.passed is False and "shown apart:" in c.checks):
            out.append(f"{c.figure}/{c.name}: an asserted equivalence without its discrimination checks "
                       f"({', '.join(DISCRIMINATION_CHECKS)} in its checks): it could pass for two methods that never "
                       "learned")
    return out


def movement_violations(claims: Iterable[Claim], starts: Starts | None = None) -> list[str]:
    """PASSing differences whose arms did not both move from their declared start (a FAIL stays:
    a claim not shown is not shown, whether or not anything learned)."""
    return [f"{c.figure}/{c.name}: a difference PASSes though its {unmoved(c, starts)}"
            for c in asserted_evidence(claims) if c.passed and unmoved(c, starts)]


def sanity_violations(claims: Iterable[Claim]) -> list[str]:
    return [f"{c.figure}/{c.name}: a CHECK that is {unverifiable(c)}" for c in claims
            if c.kind == "sanity" and c.passed and unverifiable(c)]


def confirmation_violations(claims: Iterable[Claim], posthoc: Mapping[tuple[str, str], str] | None = None,
                            starts: Starts | None = None) -> list[str]:
    """A row asserted on the seeds that made its choice, and a declared post-hoc choice
    ``{(figure, claim-name pattern): what}`` without a confirmation row on other seeds that is
    asserted — or reported for a reason the audit verifies (its band no narrower than the gap, its
    favoured arm never moved)."""
    claims = list(claims)
    out = [f"{c.figure}/{c.name}: its choice ({c.choice}) was made on its own data and it is asserted: "
           "assert it on seeds never used to make the choice, report this one"
           for c in asserted_evidence(claims) if c.choice and "confirmed on" not in c.choice]
    for (figure, pattern), what in (posthoc or {}).items():
        rows = [c for c in claims if c.kind == "evidence" and c.figure == figure and fnmatchcase(c.name, pattern)
                and (c.passed is not None or (c.test in BAND_TESTS and undiscriminating(c)) or unmoved(c, starts))]
        if not any("confirmed on" in c.choice for c in rows):
            out.append(f"{figure}/{pattern}: the post-hoc choice ({what}) has no asserted row confirmed on other seeds")
    return out


def identity_label_violations(claims: Iterable[Claim], identities: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Rows that an identity or a theorem implies (``identities``: figure → claim-name patterns)
    recorded as evidence."""
    return [f"{c.figure}/{c.name}: implied by an identity or a theorem of its figure, so a sanity check, "
            "not evidence" for c in claims
            if c.kind == "evidence" and any(fnmatchcase(c.name, p) for p in (identities or {}).get(c.figure, ()))]


def _excused(c: Claim, asserted: list[Claim], starts: Starts | None) -> bool:
    """Whether a reported row may stay reported though it decides a paper's statement: its
    measurement is counted by an asserted row, its choice was made on its data, or its arms never moved."""
    return ((bool(c.choice) and "confirmed on" not in c.choice) or (would_pass(c) and bool(unmoved(c, starts)))
            or any(same_measurement(c, a) for a in asserted))


def _deciding(claims: list[Claim], published: Mapping | None, starts: Starts | None) -> list[Claim]:
    asserted = asserted_evidence(claims)
    return [c for c in claims if c.kind == "evidence" and c.passed is None and would_pass(c) is not None
            and c.agreement != "inconclusive" and _match(published, c) is not None
            and not _excused(c, asserted, starts)]


def published_violations(claims: Iterable[Claim], published: Mapping[tuple[str, str], str] | None = None,
                         starts: Starts | None = None) -> list[str]:
    """Reported rows that test a paper's statement (``published``: (figure, claim-name pattern) →
    the statement) and whose interval decides it: asserted rows, never INFO (``_excused`` aside)."""
    return [f"{c.figure}/{c.name}: reported, but its interval {c.agreement} the paper's statement it tests: assert it"
            for c in _deciding(list(claims), published, starts)]


#: the old name of the rule on reported rows (it first covered contradictions only)
contradiction_violations = published_violations


def folded(c: Claim) -> list[Claim]:
    """The reported rows folded into ``c`` (``fold``), as the rows they were."""
    return [Claim(c.figure, name, statement, estimate, low, high, None, f"folded into {c.name}: one measurement, "
                  "one row", c.kind, len(values), test="measure", values=tuple(values))
            for name, statement, estimate, low, high, values in c.also]


def fold(claims: list[Claim], claim: Claim) -> tuple[list[Claim], Claim]:
    """One measurement, one row: ``claims`` with the reported row ``claim`` folded into the asserted evidence
    row of its figure that counts its measurement (``same_measurement``) and prints the same number —
    that row lists ``claim`` in ``also`` (name, statement, number, per-seed values: the published column
    and the headline table find it there) and ``claim`` is no longer a row —, and the row that states it
    now. Without such a row ``claim`` stays a row of its own."""
    if claim.kind != "evidence" or claim.passed is not None:
        raise ValueError(f"claim must be a reported evidence row to be folded into another, got {claim.name!r} "
                         f"({claim.kind}, {claim.verdict})")
    if not any(c is claim for c in claims):
        raise ValueError(f"claim {claim.name!r} is not a row of these claims")
    host = next((c for c in asserted_evidence(claims) if c.figure == claim.figure and c.interval == claim.interval
                 and same_measurement(c, claim)), None)
    if host is None:
        return claims, claim
    row = dataclasses.replace(host, also=host.also + ((claim.name, claim.statement, claim.estimate, claim.low,
                                                       claim.high, claim.values),))
    return [row if c is host else c for c in claims if c is not claim], row


def fold_violations(claims: Iterable[Claim]) -> list[str]:
    """Rows folded into a row (``fold``) that are not one measurement with it, or print another number."""
    return [f"{c.figure}/{f.name} is folded into {c.figure}/{c.name} but is "
            + ("not one measurement with it" if not same_measurement(c, f) else
               f"another number ({f.interval}, not {c.interval})") + ": a row of its own"
            for c in claims for f in folded(c)
            if c.kind != "evidence" or not same_measurement(c, f) or f.interval != c.interval]


def audit(claims: Iterable[Claim], posthoc: Mapping[tuple[str, str], str] | None = None,
          identities: Mapping[str, Iterable[str]] | None = None,
          published: Mapping[tuple[str, str], str] | None = None, starts: Starts | None = None) -> list[str]:
    """Every violation of the module's rules in ``claims`` (one line each; empty when they hold)."""
    claims = list(claims)
    return (identity_violations(claims, identities) + hidden_fail_violations(claims)
            + discrimination_violations(claims) + movement_violations(claims, starts) + sanity_violations(claims)
            + confirmation_violations(claims, posthoc, starts) + identity_label_violations(claims, identities)
            + published_violations(claims, published, starts) + fold_violations(claims))


def _demote(c: Claim, why: str) -> Claim:
    return dataclasses.replace(c, passed=None, detail=f"not evidence ({why}): {c.detail}")


def settle(claims: Iterable[Claim], published: Mapping[tuple[str, str], str] | None = None,
           starts: Starts | None = None) -> list[Claim]:
    """``claims`` with each row's class recomputed under the rules, in their order: an unverifiable
    CHECK, an equivalence PASSing without a gap wider than its band and a difference whose arms never
    moved are reported (INFO, with the reason); then a reported row that decides a paper's statement
    is asserted (its interval's verdict); a reported row that is one measurement with an asserted
    one names it (``merged``). Twins are resolved as ``ClaimBook.record`` does
    (a FAIL before a PASS); the result does not depend on the order of ``claims``."""
    out = []
    for c in claims:
        if c.kind == "sanity" and c.passed and unverifiable(c):
            c = dataclasses.replace(c, passed=None, detail=f"reported, not a CHECK ({unverifiable(c)}): {c.detail}")
        elif c.kind == "evidence" and c.passed and c.test in BAND_TESTS and undiscriminating(c):
            c = _demote(c, undiscriminating(c))
        elif c.kind == "evidence" and c.passed and unmoved(c, starts):
            c = _demote(c, unmoved(c, starts))
        out.append(c)
    decide = {id(c) for c in _deciding(out, published, starts)}
    out = [dataclasses.replace(c, passed=would_pass(c), detail=f"asserted: its interval decides the paper's "
                               f"statement it tests ({c.detail})") if id(c) in decide else c for c in out]
    return merged(out)


#: how a reported row names the asserted row that counts its measurement (``merged``)
TWIN = "one measurement with"


def merged(claims: list[Claim]) -> list[Claim]:
    """``claims`` with each reported evidence row that is one measurement with an asserted evidence
    row naming it (once): the asserted row counts that measurement, the reported one shows it again."""
    asserted = asserted_evidence(claims)

    def twin(c: Claim) -> Claim:
        if c.kind != "evidence" or c.passed is not None or TWIN in c.detail:
            return c
        for a in asserted:
            why = same_measurement(c, a)
            if why:
                return dataclasses.replace(c, detail=f"{TWIN} {a.figure}/{a.name}, counted there ({why}): {c.detail}")
        return c
    return [twin(c) for c in claims]


__all__ = ["BAND_TESTS", "DISCRIMINATION_CHECKS", "IDENTITY_CORR", "IDENTITY_MIN_N", "IDENTITY_RTOL",
           "asserted_evidence", "audit", "confirmation_violations", "contradiction_violations",
           "discrimination_violations", "fold", "fold_violations", "folded", "hidden_fail_violations",
           "identity_label_violations", "identity_violations",
           "merged", "movement_violations", "published_violations", "same_measurement", "same_vectors", "sanity_violations", "segments",
           "settle", "undiscriminating", "unmoved", "unverifiable", "would_pass"]
