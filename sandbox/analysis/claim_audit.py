"""What makes an asserted claim evidence beyond its own test: the checks a claim table must pass.

* **Identity** (``same_measurement``): two asserted evidence rows whose per-seed vectors agree —
  within ``IDENTITY_RTOL`` of their scale, or correlated with |r| ≥ ``IDENTITY_CORR`` over at least
  ``IDENTITY_MIN_N`` seeds — are one measurement, whatever their statements say (TIS's error is
  REINFORCE's when the ratio is 1 on-policy; "REINFORCE fails" stated twice on one set of values).
  One row must cover them. A constant vector (every seed the same value, e.g. every seed solved)
  identifies nothing and is not compared; fewer than ``IDENTITY_MIN_N`` seeds are compared only by
  agreement, because a correlation over a few points is ±1 by chance.
* **Discrimination**: an asserted equivalence row (``test == 'equivalent'``) must carry the record of
  its two checks (``ClaimBook.equivalent``): both curves informative, and the same test against the
  other method's data failing. Without them it can pass for two methods that never learned.
* **Confirmation**: a row whose window, band, threshold or seed set was chosen after its data
  (``choice``) is asserted only on seeds never used to make the choice; the row that saw the data
  is reported (INFO). ``posthoc`` lists the choices a figure registry declares, each of which must
  appear as an asserted confirmation row.
* **Identities**: ``identities`` lists, per figure, the claims that an identity or a theorem implies
  (claim-name patterns); such a row must be a sanity check, never evidence.
* **Contradictions**: a reported row that tests a paper's statement (``published``) and whose
  interval contradicts it must be asserted — a FAIL, counted, with its cause — not left in INFO.

``audit`` returns one line per violation; ``sandbox reproduce`` prints them and a test enforces that
the committed paper-tier table has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

import numpy as np

from sandbox.analysis.claim_table import Claim

#: vectors whose largest difference is below this share of their scale are the same measurement
IDENTITY_RTOL = 1e-4
#: |correlation| at or above which two per-seed vectors are the same measurement …
IDENTITY_CORR = 0.999
#: … counted only from this many seeds (over fewer, a correlation near ±1 happens by chance)
IDENTITY_MIN_N = 8
#: what an asserted equivalence row's ``checks`` must record
DISCRIMINATION_CHECKS = ("informative:", "discriminates:")


def asserted_evidence(claims: Iterable[Claim]) -> list[Claim]:
    return [c for c in claims if c.kind == "evidence" and c.passed is not None]


def same_vectors(x, y) -> str:
    """Why per-seed vectors ``x`` and ``y`` are one measurement ('' if they are not): they agree
    within ``IDENTITY_RTOL`` of their scale, or correlate with |r| ≥ ``IDENTITY_CORR`` (from
    ``IDENTITY_MIN_N`` seeds on). Constant vectors, and vectors with a NaN, identify nothing."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.size < 2 or x.shape != y.shape or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return ""
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # a constant vector identifies nothing
        return ""
    scale = max(np.abs(x).max(), np.abs(y).max())
    gap = float(np.abs(x - y).max())
    if gap <= IDENTITY_RTOL * scale:
        return f"their {x.size} per-seed values agree to {gap:.2g}"
    if x.size >= IDENTITY_MIN_N:
        r = float(np.corrcoef(x, y)[0, 1])
        if abs(r) >= IDENTITY_CORR:
            return f"their {x.size} per-seed values correlate at r = {r:.5f}"
    return ""


def same_measurement(a: Claim, b: Claim) -> str:
    """Why rows ``a`` and ``b`` are one measurement ('' if they are not): ``same_vectors`` of the
    per-seed vectors their tests ran on."""
    return same_vectors(a.values, b.values)


def identity_violations(claims: Iterable[Claim]) -> list[str]:
    """Every pair of asserted evidence rows that is one measurement, as a line naming both."""
    rows, out = asserted_evidence(claims), []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            why = same_measurement(a, b)
            if why:
                out.append(f"{a.figure}/{a.name} and {b.figure}/{b.name} are one measurement ({why}): "
                           "state them in one row, or make the implied one a sanity check")
    return out


def discrimination_violations(claims: Iterable[Claim]) -> list[str]:
    return [f"{c.figure}/{c.name}: an asserted equivalence without its discrimination checks "
            f"({', '.join(DISCRIMINATION_CHECKS)} in its checks): it could pass for two methods that never learned"
            for c in asserted_evidence(claims)
            if c.test == "equivalent" and not all(k in c.checks for k in DISCRIMINATION_CHECKS)
            and not (c.passed is False and "shown apart:" in c.checks)]


def confirmation_violations(claims: Iterable[Claim], posthoc: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    """A row asserted on the seeds that made its choice, and a declared post-hoc choice
    ``{(figure, claim-name pattern): what}`` without an asserted confirmation row."""
    claims = list(claims)
    out = [f"{c.figure}/{c.name}: its choice ({c.choice}) was made on its own data and it is asserted: "
           "assert it on seeds never used to make the choice, report this one"
           for c in asserted_evidence(claims) if c.choice and "confirmed on" not in c.choice]
    for (figure, pattern), what in (posthoc or {}).items():
        rows = [c for c in asserted_evidence(claims) if c.figure == figure and fnmatchcase(c.name, pattern)]
        if not any("confirmed on" in c.choice for c in rows):
            out.append(f"{figure}/{pattern}: the post-hoc choice ({what}) has no asserted row confirmed on other seeds")
    return out


def identity_label_violations(claims: Iterable[Claim], identities: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Rows that an identity or a theorem implies (``identities``: figure → claim-name patterns)
    recorded as evidence."""
    return [f"{c.figure}/{c.name}: implied by an identity or a theorem of its figure, so a sanity check, "
            "not evidence" for c in claims
            if c.kind == "evidence" and any(fnmatchcase(c.name, p) for p in (identities or {}).get(c.figure, ()))]


def contradiction_violations(claims: Iterable[Claim], published: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    """Reported rows that state a paper's claim (``published``: (figure, claim-name pattern) → the
    paper's statement) whose interval lies entirely on the other side: a result that contradicts a
    paper is an asserted FAIL, never INFO — unless the row repeats an asserted row's measurement."""
    claims = list(claims)
    asserted = asserted_evidence(claims)
    return [f"{c.figure}/{c.name}: reported, but its interval contradicts the paper's statement it tests: assert it"
            for c in claims
            if c.kind == "evidence" and c.passed is None and c.agreement == "contradicts"
            and any(f == c.figure and fnmatchcase(c.name, p) for f, p in (published or {}))
            and not any(same_measurement(c, a) for a in asserted)]


def audit(claims: Iterable[Claim], posthoc: Mapping[tuple[str, str], str] | None = None,
          identities: Mapping[str, Iterable[str]] | None = None,
          published: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    """Every violation of the module's rules in ``claims`` (one line each; empty when they hold)."""
    claims = list(claims)
    return (identity_violations(claims) + discrimination_violations(claims)
            + confirmation_violations(claims, posthoc) + identity_label_violations(claims, identities)
            + contradiction_violations(claims, published))


__all__ = ["DISCRIMINATION_CHECKS", "IDENTITY_CORR", "IDENTITY_MIN_N", "IDENTITY_RTOL", "asserted_evidence",
           "audit", "confirmation_violations", "contradiction_violations", "discrimination_violations", "identity_label_violations",
           "identity_violations", "same_measurement", "same_vectors"]
