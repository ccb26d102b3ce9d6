"""Tests whose level holds at any seed count and for any shape of data: the exact sign-flip test,
and equivalence by two one-sided tests (TOST).

**Sign-flip** (Fisher 1935; the paired permutation test). For paired differences d_1 … d_n the
null "the d_i are symmetric about δ" makes every sign pattern s ∈ {±1}ⁿ of d − δ equally likely.
Its one-sided p-value for "the mean exceeds δ" is P_s(mean(s·(d − δ)) ≥ mean(d − δ)). Each
pattern s crosses the observed value at one shift t_s = (mean(s·d) − mean(d)) / (mean(s) − 1), so
p(δ) = (1 + #{s ≠ 1 : t_s ≤ δ}) / 2ⁿ and the confidence bounds are order statistics of the t_s:
the interval is the set of δ that neither one-sided test rejects at (1 − c)/2 (test inversion,
Hartigan 1969). Valid for bimodal and censored metrics (a seed stuck at 0.5 beside seeds at 0.002,
an H* capped at the grid's top), where a t-interval is not. Its smallest one-sided p-value is
2⁻ⁿ: with 5 seeds nothing can pass at 2.5% (1/32 > 0.025); 6 seeds can (1/64). Exact for
n ≤ ``EXACT_MAX_N`` (all 2ⁿ patterns), Monte Carlo with a fixed seed above.

**TOST** (Schuirmann 1987): "a and b are equivalent within ±band" passes when the (1 − 2α)
interval of the difference lies inside (−band, band): both one-sided tests reject at α. The band
is part of the claim and must be declared before the data are seen.
"""

from __future__ import annotations

import math

import numpy as np

from sandbox.analysis.stats import Interval, _confidence, t_interval, welch_interval

#: largest n whose 2ⁿ sign patterns are enumerated (2²⁰ ≈ 10⁶); above it, a fixed-seed Monte Carlo
EXACT_MAX_N = 20
MONTE_CARLO = 200_000


def _patterns(n: int, seed: int) -> tuple[np.ndarray, str]:
    """Every sign pattern but all-plus as rows of ±1 (exact), or MONTE_CARLO random ones."""
    if n <= EXACT_MAX_N:
        codes = np.arange(1, 2**n, dtype=np.int64)  # 0 is all-plus, counted apart
        bits = (codes[:, None] >> np.arange(n)) & 1
        return 1 - 2 * bits.astype(np.int8), f"exact over 2^{n} sign patterns"
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-1, 1], dtype=np.int8), size=(MONTE_CARLO, n)), f"Monte Carlo, {MONTE_CARLO} patterns"


def _lower_bound(d: np.ndarray, tail: float, signs: np.ndarray, total: int) -> float:
    """The smallest δ that the one-sided test of "mean > δ" does not reject at level ``tail``."""
    n = d.size
    a = signs @ d / n
    b = signs.sum(1) / n  # < 1 for every pattern but all-plus
    t = np.sort((a - d.mean()) / (b - 1))
    # p(δ) = (1 + #{t ≤ δ}) / total; the bound is the first t at which p exceeds ``tail``
    k = math.floor(tail * total - 1) + 1  # the fewest t ≤ δ with (1 + k)/total > tail
    if k <= 0:
        return -math.inf
    return float(t[min(k, t.size) - 1])


def sign_flip_interval(d, confidence: float = 0.95, seed: int = 0) -> Interval:
    """Mean of the paired differences ``d`` with the exact sign-flip confidence interval (module
    docstring). The bounds are infinite where n is too small for the level (2⁻ⁿ > (1 − c)/2)."""
    c = _confidence(confidence)
    d = np.asarray(d, dtype=float).ravel()
    if d.size == 0 or not np.isfinite(d).all():
        raise ValueError(f"d must be non-empty and finite, got {d.size} values "
                         f"({int((~np.isfinite(d)).sum())} not finite: decide how diverged seeds count first)")
    signs, how = _patterns(d.size, seed)
    total = signs.shape[0] + 1 if d.size <= EXACT_MAX_N else signs.shape[0]
    tail = (1 - c) / 2
    low = _lower_bound(d, tail, signs, total)
    high = -_lower_bound(-d, tail, signs, total)
    return Interval(float(d.mean()), low, high, c, int(d.size), f"sign-flip, {how}")


def smallest_p(n: int) -> float:
    """The smallest one-sided p-value a sign-flip test over n pairs can give: 2⁻ⁿ."""
    return 2.0 ** -n


def equivalence_interval(a, b, paired: bool, alpha: float = 0.05) -> Interval:
    """The (1 − 2α) interval of mean(a) − mean(b) that TOST compares with its band: the paired t
    interval of a − b, or Welch's for independent samples."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    confidence = 1 - 2 * alpha
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
        return t_interval(a - b, confidence)
    return welch_interval(a, b, confidence)


__all__ = ["EXACT_MAX_N", "equivalence_interval", "sign_flip_interval", "smallest_p"]
