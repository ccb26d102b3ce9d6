"""When two rows of a claim table are one measurement: identity by what their per-seed vectors
measure, not by the names or statements around them.

Two per-seed vectors ``x`` and ``y`` are one measurement when

* **they agree** — the largest difference is below ``IDENTITY_RTOL`` of their scale (TIS is
  REINFORCE when the ratio is 1 on-policy), at any number of seeds;
* **one is an affine map of the other, without any one seed** — from ``IDENTITY_MIN_N`` seeds on,
  the *smallest* |Pearson r| over the vectors with one seed left out is at least ``IDENTITY_CORR``:
  location and spread are carried over by one line, so a negation, a shift by a threshold (ESS/B
  against 1 and against the synchronous 1) or a rescaling is the same row. Leaving each seed out
  in turn makes it robust to one outlying seed of a shared arm: Kondo 10 % and 30 % against one
  REINFORCE arm with one stuck seed correlate at r = 0.999 through that seed alone and at 0.83
  without it — two measurements;
* **one is a monotone map of the other** — from ``IDENTITY_MIN_N`` seeds on, with at least
  ``RANK_MIN_DISTINCT`` distinct values each, their seeds fall in exactly the same order (Spearman
  |ρ| = 1): a log ratio and a difference of the same two arms (by chance, for 8 independent seeds,
  2/8! = 5e-5);
* **one is a subset of the other's seeds** (up to sign) — every value of the shorter vector is a
  distinct value of the longer one (within ``IDENTITY_RTOL``), from ``SUBSET_MIN_N`` values on, at
  least ``SUBSET_DISTINCT`` of them distinct: a row restated on some of its seeds, or one arm of an
  unpaired comparison restated alone.

* **both are one constant** — every seed of both gives the same value (within ``IDENTITY_RTOL``;
  ``constants``, for rows whose estimates are numbers): location and spread agree, so the rows state
  one number (``dg-longer-than-pmpo`` and ``longest-H-dg``: DG solves the grid's top H = 10 in every
  seed and PMPO none, so DG − PMPO is DG's own longest H). A constant agrees with no other constant
  and with no varying vector, and no line or order relates it to anything: beyond exact agreement
  it identifies nothing. A row whose estimate is undefined (NaN: no event in either arm) measured
  nothing, and is one measurement with nothing.

A vector with a NaN is not compared.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

#: vectors whose largest difference is below this share of their scale are the same measurement
IDENTITY_RTOL = 1e-4
#: the smallest leave-one-seed-out |correlation| at which two vectors are one measurement …
IDENTITY_CORR = 0.99
#: … counted only from this many seeds (over fewer, a correlation near ±1 happens by chance)
IDENTITY_MIN_N = 8
#: distinct values each vector needs before the same order of seeds identifies it
RANK_MIN_DISTINCT = 5
#: the fewest values, and the share of them distinct, a subset needs to identify its superset
SUBSET_MIN_N, SUBSET_DISTINCT = 3, 0.75


def _usable(x: np.ndarray) -> bool:
    return x.size >= 2 and bool(np.isfinite(x).all()) and np.ptp(x) > 0


def one_constant(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``x`` and ``y`` hold as many seeds, each the same value throughout, and that value agrees."""
    if x.size != y.size or x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return False
    if np.ptp(x) > 0 or np.ptp(y) > 0:
        return False
    return bool(abs(x[0] - y[0]) <= IDENTITY_RTOL * max(abs(x[0]), abs(y[0])))


def loo_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """The smallest |Pearson r| of ``x`` and ``y`` over every way of leaving one seed out (0 when a
    vector is constant without some seed), from the sums less each seed's terms."""
    x, y = x - x.mean(), y - y.mean()  # centred: the sums stay well conditioned
    m = x.size - 1
    sx, sy = x.sum() - x, y.sum() - y
    sxx, syy, sxy = (x * x).sum() - x * x, (y * y).sum() - y * y, (x * y).sum() - x * y
    vx, vy = sxx - sx * sx / m, syy - sy * sy / m
    scale = max(float(np.abs(x).max()), float(np.abs(y).max())) ** 2 * 1e-12
    if (vx <= scale).any() or (vy <= scale).any():
        return 0.0
    return float(np.min(np.abs(sxy - sx * sy / m) / np.sqrt(vx * vy)))


def contained(small: np.ndarray, large: np.ndarray, tol: float) -> bool:
    """Whether every value of ``small`` matches a distinct value of ``large`` within ``tol``."""
    pool = np.sort(large)
    used = np.zeros(pool.size, dtype=bool)
    for v in np.sort(small):
        i = int(np.searchsorted(pool, v - tol))
        while i < pool.size and (used[i] or pool[i] < v - tol):
            i += 1
        if i == pool.size or pool[i] > v + tol:
            return False
        used[i] = True
    return True


def same_vectors(x, y, constants: bool = True) -> str:
    """Why per-seed vectors ``x`` and ``y`` are one measurement ('' if they are not): module docstring.
    ``constants``: whether two vectors of one agreeing constant count (False for a row that measured nothing)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if constants and one_constant(x, y):
        return f"every one of their {x.size} seeds gives {x[0]:.4g}: one number, stated in both"
    if not (_usable(x) and _usable(y)):
        return ""
    scale = max(np.abs(x).max(), np.abs(y).max())
    if x.size != y.size:
        small, large = (x, y) if x.size < y.size else (y, x)
        distinct = np.unique(np.round(small / (IDENTITY_RTOL * scale))).size
        if small.size >= SUBSET_MIN_N and distinct >= max(SUBSET_MIN_N, SUBSET_DISTINCT * small.size):
            for sign in (1.0, -1.0):
                if contained(sign * small, large, IDENTITY_RTOL * scale):
                    return (f"the {small.size} per-seed values of one are {'' if sign > 0 else 'negated '}values of "
                            f"the other's {large.size}: a subset of its seeds")
        return ""
    gap = float(np.abs(x - y).max())
    if gap <= IDENTITY_RTOL * scale:
        return f"their {x.size} per-seed values agree to {gap:.2g}"
    if x.size < IDENTITY_MIN_N:
        return ""
    r = loo_correlation(x, y)
    if r >= IDENTITY_CORR:
        return f"their {x.size} per-seed values are one line apart: |r| ≥ {r:.4f} with any one seed left out"
    if min(np.unique(x).size, np.unique(y).size) >= RANK_MIN_DISTINCT:
        rho = float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])
        if abs(rho) > 1 - 1e-12:
            return f"their {x.size} seeds fall in the same order (Spearman ρ = {rho:+.0f}): a monotone transform"
    return ""


__all__ = ["IDENTITY_CORR", "IDENTITY_MIN_N", "IDENTITY_RTOL", "RANK_MIN_DISTINCT", "SUBSET_DISTINCT", "SUBSET_MIN_N",
           "contained", "loo_correlation", "one_constant", "same_vectors"]
