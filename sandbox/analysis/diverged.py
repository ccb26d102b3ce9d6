"""Diverged seeds in a claim: a NaN or infinite metric counts as the worst value of its metric
(``sandbox.analysis.claims``' module docstring says which end)."""

from __future__ import annotations

import numpy as np

from sandbox.core.validation import check_choice

WORSE = (None, "high", "low")
def per_seed(name: str, values) -> np.ndarray:
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


def diverged_note(samples: dict[str, np.ndarray], worse: str | None) -> str:
    """What a claim's detail says of its diverged (NaN) seeds: how many in each sample, and how they count."""
    counts = {k: int(np.isnan(v).sum()) for k, v in samples.items()}
    if not sum(counts.values()):
        return ""
    rule = f"scored as the {'highest' if worse == 'high' else 'lowest'} value" if worse else "counted against the claim"
    where = ", ".join(f"{n} of {samples[k].size} in {k}" for k, n in counts.items() if n)
    return f"; diverged (NaN): {where}, {rule}"


__all__ = ["WORSE", "diverged_note", "per_seed", "score_diverged"]
