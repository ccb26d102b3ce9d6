"""Input checks at public boundaries.

Every failure raises ``ValueError`` naming the argument and the valid range or options, never a
silent broadcast (DESIGN.md, Conventions).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor


class NonFiniteError(ValueError):
    """A tensor that must be finite holds NaN or ±inf: a diverged computation (a ``ValueError``,
    so callers that refuse bad input keep refusing it; those that count divergence catch this)."""


def on_host(x: Tensor) -> bool:
    """Whether checks of ``x``'s values may ask the host: True for CPU tensors. On an accelerator
    every such check (finiteness, ranges, masks) would stop the host until the device catches up,
    every step; there they are skipped inside a step (shapes and dtypes are still checked, and the
    loop handles non-finite numbers on the device, ``sandbox.runtime.loop``). Run a config on the
    CPU to have its values checked."""
    return x.device.type == "cpu"


def all_finite(x: Tensor) -> bool:
    """True when no entry is NaN or ±inf. A NaN or an infinity makes the sum non-finite, so one
    reduction answers the common case (12× faster than an elementwise check on 100k floats); the
    elementwise check runs only when the sum overflows or something is wrong. Off the host
    (``on_host``) it is not asked: True."""
    if x.numel() == 0 or not on_host(x):
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
        raise NonFiniteError(f"{name} contains NaN or inf values; all entries must be finite")
    return x


def check_shape(name: str, x: Tensor, shape: Sequence[int], like: str) -> None:
    """Require ``x.shape == shape`` exactly (no broadcasting); ``like`` names the reference."""
    if tuple(x.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have shape {tuple(shape)} (matching {like}), got {tuple(x.shape)}"
        )


def short_repr(value: object, limit: int = 60) -> str:
    """A one-line repr of at most ``limit`` characters for error messages (a tensor's spans lines)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_number(value: object) -> bool:
    """True for real numbers — Python and numpy ints and floats (``np.float32(0.5)``) — but not
    for bools, which are flags, not quantities."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_range(
    name: str,
    value: float | int | None,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_none: bool = False,
    finite: bool = True,
) -> None:
    """Require ``low <= value <= high`` (with open ends when asked). NaN is never valid; ±inf only
    with ``finite=False`` (for caps where ∞ means "no cap")."""
    if value is None:
        if allow_none:
            return
        raise ValueError(f"{name} must be a number, got None")
    if not is_number(value):
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {short_repr(value)}")
    integral = isinstance(value, numbers.Integral)  # always finite (and math.isinf(10**400) overflows)
    if finite and not integral and math.isinf(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    lo_ok = value > low if low_open else value >= low
    hi_ok = value < high if high_open else value <= high
    if (not integral and math.isnan(value)) or not (lo_ok and hi_ok):
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low}, {high}{hb}, got {value}")


#: no integer setting (steps, delays, budgets, periods, sizes, seeds …) goes beyond ±2⁶²: results store
#: them in int64 columns and tensors, and the loop adds them (a step plus a delay, D + 1 draws) —
#: ``staleness.D = 2**64`` used to train a whole run and then lose it to an ``OverflowError``
INT_LIMIT = 2**62


def check_int(
    name: str,
    value: int | None,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    allow_none: bool = False,
) -> None:
    """Require an integer (Python or numpy; not a bool, not a float such as 1.5 or 2.0) with
    ``low <= value <= high``, and within ±``INT_LIMIT`` where no bound is given. A float is refused even
    when integral: 2.0 and 2 would hash as different configs, and 1.5 steps never end."""
    if value is None and allow_none:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {short_repr(value)}")
    if (value > INT_LIMIT and high == math.inf) or (value < -INT_LIMIT and low == -math.inf):  # (explicit bounds: theirs)
        raise ValueError(f"{name} must lie within ±2**62 (an int64, with room for sums of steps and delays), got "
                         f"{short_repr(value)}")
    check_range(name, value, low=low, high=high)


#: how deeply a JSON or YAML document may nest (a RunConfig nests 4 levels; Python's parsers recurse)
MAX_NESTING = 100


class TooDeep(ValueError):
    """A document nested deeper than ``MAX_NESTING``."""


def check_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """Refuse JSON (or flow-style YAML) text whose brackets nest deeper than ``limit``, before a
    recursive parser meets it (a 200,000-deep ``--config`` was a bare ``RecursionError``)."""
    depth = 0
    quoted = escaped = False
    for position, char in enumerate(text):
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                raise TooDeep(f"nested deeper than {limit} levels (at character {position}); a config nests a few")
        elif char in "]}":
            depth -= 1


def check_choice(name: str, value: object, options: Iterable[object]) -> None:
    """Require ``value`` to be one of ``options``."""
    options = list(options)
    try:
        valid = value in options
    except (TypeError, RuntimeError):  # an unhashable or tensor value compares to no option
        valid = False
    if not valid:
        raise ValueError(f"{name} must be one of {options}, got {short_repr(value)}")


#: annotation → accepted types, for the fields no range or choice check covers (flags, paths, lists)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {"bool": (bool,), "str": (str,), "tuple": (tuple, list), "dict": (dict,)}


def field_kind(f: dataclasses.Field) -> tuple[str, bool]:
    """A dataclass field's annotation as (base type name, optional): ``str | None`` → ('str', True);
    '' for unions of several types."""
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    parts = {part.strip() for part in annotation.split("|")}
    optional, rest = "None" in parts, parts - {"None"}
    return (rest.pop() if len(rest) == 1 else ""), optional


def check_writable_dir(path: str | os.PathLike, name: str) -> Path:
    """Require ``path`` to be a folder, or one that can be made, where this process may write."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name} {path}: exists and is not a folder")
    existing = next(p for p in (folder.resolve(), *folder.resolve().parents) if p.exists())
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{name} {path}: {existing} is not writable")
    return folder


def check_field_types(cls: type, kwargs: dict[str, object]) -> None:
    """Require each keyword of the dataclass ``cls`` annotated ``bool``, ``str``, ``tuple`` or
    ``dict`` (or ``… | None``) to have that type: ``stochastic="no"`` would otherwise be truthy.
    Numbers are left to the dataclass's own ``check_int``/``check_range``."""
    for f in dataclasses.fields(cls):
        if f.name not in kwargs:
            continue
        base, optional = field_kind(f)
        value = kwargs[f.name]
        if base in _FIELD_TYPES and not (isinstance(value, _FIELD_TYPES[base]) or (optional and value is None)):
            kind = base + (" or None" if optional else "")
            raise ValueError(f"{f.name} must be a {kind}, got {type(value).__name__} {short_repr(value)}")



def unique_pairs(pairs: list[tuple[str, object]], duplicate: Callable[[str], Exception]) -> dict:
    """A JSON/YAML object's (key, value) pairs as a dict, raising ``duplicate(key)`` for a key given
    twice (``json`` would keep the last silently); an ``object_pairs_hook``."""
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise duplicate(key)
        seen[key] = value
    return seen

def machine_memory() -> int:
    """Bytes of memory this process may use: the physical memory, or a lower cgroup limit (0 when
    unknown)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit)) if total else int(limit)
    except OSError:
        pass
    return total


def check_memory(what: str, need: int, detail: str) -> None:
    """Refuse, before anything is allocated, a size that cannot fit: ``what`` (the arguments at
    fault) would need ``need`` bytes (``detail``: what they are), more than ``machine_memory()``."""
    total = machine_memory()
    if total and need > total:
        raise ValueError(f"{what} would need about {gib(need)} of memory ({detail}), more than this "
                         f"machine's {gib(total)}; use smaller sizes")


def gib(n: float) -> str:
    """Bytes in GiB for messages: '0.0373 GiB', '23.5 GiB', '2,980 GiB'."""
    x = n / 2**30
    return f"{x:,.0f} GiB" if x >= 100 else f"{x:.3g} GiB"
