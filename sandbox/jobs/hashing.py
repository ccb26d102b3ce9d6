"""How a canary's outcome is hashed: exactly, and portably (rounded to a stated grid).

``feed`` hashes tensors, numbers, text, dicts and lists, with their names, dtypes and shapes, into
a hashlib object or a ``Digests`` pair: ``exact`` takes every bit, ``portable`` floats rounded to
``PORTABLE_BITS`` of their tensor's scale (``portable_bytes``), so that another CPU capability or
BLAS path, which moves the last bits, gives the same portable hash (``sandbox.jobs.fingerprints``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch
from torch import Tensor

#: bits of a float tensor's scale (the power of two above its largest |value|) that the portable hash
#: keeps: another CPU capability or BLAS path moves float64 canaries by a few ulps (≈ 2⁻⁵², 2⁻²⁰ of
#: this grid) and float32 ones by ≤ 2e-7 of their values before the first update (2⁻¹² of this grid)
PORTABLE_BITS = {torch.float64: 32}
PORTABLE_BITS_ELSE = 8


class Digests:
    """The two hashes a canary feeds: ``exact`` (every bit; what a result of the platform that made
    it is checked by) and ``portable`` (floats rounded to ``PORTABLE_BITS`` of their tensor's scale;
    with ``floats`` False — a tiny run after its first Adam update, which turns the rounding noise of
    cancelling gradients into changes of up to lr — floats are left out and only integers count)."""

    def __init__(self, prefix: bytes) -> None:
        self.exact, self.portable, self.floats = hashlib.sha256(prefix), hashlib.sha256(prefix), True
        self.fed = False
        self.paths: Digests | None = None  # the component's settings moved off their values (canaries._paths)

    def update(self, data: bytes) -> None:
        self.exact.update(data)
        self.portable.update(data)
        self.fed = True


def portable_bytes(t: Tensor, floats: bool = True) -> bytes:
    """``t``'s values as the portable hash sees them: integers as they are; floats on a grid of
    2^-bits of the power of two above the tensor's largest finite |value| (NaN and ±∞ kept apart);
    none when ``floats`` is False."""
    if not t.is_floating_point():
        return t.numpy().tobytes()
    if not floats:
        return b"floats left out"
    x = t.double()
    finite = torch.isfinite(x)
    peak = float(x[finite].abs().max()) if bool(finite.any()) else 0.0
    scale = 2.0 ** math.ceil(math.log2(peak)) if peak > 0 else 1.0
    grid = scale * 2.0 ** -PORTABLE_BITS.get(t.dtype, PORTABLE_BITS_ELSE)
    rounded = torch.where(finite, torch.round(torch.where(finite, x, 0.0) / grid), 0.0).to(torch.int64)
    special = torch.where(torch.isnan(x), 1, torch.where(x == math.inf, 2, torch.where(x == -math.inf, 3, 0)))
    return rounded.numpy().tobytes() + special.to(torch.int8).numpy().tobytes()


def _portable_repr(obj: Any) -> str:
    if isinstance(obj, float) and math.isfinite(obj) and obj != 0.0:
        mantissa, exponent = math.frexp(obj)  # 32 bits of a Python float (a float64)
        return f"{round(mantissa * 2**32)}e{exponent}"
    return repr(obj)


def feed(digest, obj: Any, where: str = "") -> None:
    """Hash ``obj`` (tensors, numbers, text, dicts, lists) into ``digest`` (a ``Digests`` or a
    hashlib object), names, dtypes and shapes included."""
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            feed(digest, obj[key], f"{where}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            feed(digest, value, f"{where}[{i}]")
    elif isinstance(obj, Tensor):
        t = obj.detach().contiguous().cpu()
        digest.update(f"{where}:{t.dtype}:{tuple(t.shape)}:".encode())
        exact = t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t
        if isinstance(digest, Digests):
            digest.exact.update(exact.numpy().tobytes())
            digest.portable.update(portable_bytes(t, digest.floats))
        else:
            digest.update(exact.numpy().tobytes())
    elif isinstance(digest, Digests) and isinstance(obj, float):
        digest.fed = True
        digest.exact.update(f"{where}={obj!r};".encode())
        digest.portable.update(f"{where}={_portable_repr(obj)};".encode())
    else:
        digest.update(f"{where}={obj!r};".encode())


__all__ = ["PORTABLE_BITS", "PORTABLE_BITS_ELSE", "Digests", "feed", "portable_bytes"]
