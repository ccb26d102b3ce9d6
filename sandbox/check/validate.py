"""Every value ``sandbox check`` reads is checked under *their* key: its type against the source's
default (a bool is a bool — the string 'false' is not; a number is a number — the string '0.2' is
not; an integer is an integer — 2.5 is not), its range where the schema states one (``Spec``), and
after mapping, the estimator, advantage and friction fields through the same validation a
``RunConfig`` runs — a refusal there names the config's key that set the field, not our field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from sandbox.core.validation import check_int, check_range, short_repr

KINDS = ("bool", "int", "number", "str", "any")


@dataclass(frozen=True)
class Spec:
    """What a key holds: ``kind`` (bool, int, number, str, any), its range (closed unless
    ``*_open``), whether None is allowed, and the strings a number may also be (verl's threshold
    strings like '0.5_5.0')."""

    kind: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    none: bool = False
    finite: bool = True


def spec_of(default: Any, spec: Spec | None) -> Spec:
    """The stated spec, else one read off the default's type (None: anything)."""
    if spec is not None:
        return spec
    if isinstance(default, bool):
        return Spec("bool")
    if isinstance(default, int):
        return Spec("int")
    if isinstance(default, float):
        return Spec("number", finite=False)
    if isinstance(default, str):
        return Spec("str")
    return Spec("any")


def check_value(key: str, value: Any, spec: Spec) -> None:
    """One ``ValueError`` line naming ``key`` when ``value`` is not what ``spec`` says."""
    if value is None:
        if spec.none or spec.kind == "any":
            return
        raise ValueError(f"{key} must be {_what(spec)}, got null")
    if spec.kind == "bool" and not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {type(value).__name__} {short_repr(value)}"
                         + (" (a string, not a boolean: drop the quotes)" if isinstance(value, str) else ""))
    if spec.kind == "str" and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {type(value).__name__} {short_repr(value)}")
    if spec.kind == "int":
        check_int(key, value, low=spec.low, high=spec.high)
    if spec.kind == "number":
        if isinstance(value, str):
            raise ValueError(f"{key} must be a number, got the string {value!r} (drop the quotes)")
        check_range(key, value, low=spec.low, high=spec.high, low_open=spec.low_open, high_open=spec.high_open,
                    finite=spec.finite)


def _what(spec: Spec) -> str:
    return {"bool": "true or false", "int": "an integer", "number": "a number", "str": "a string"}.get(spec.kind,
                                                                                                    "set")


def blame(err: ValueError, rows) -> str:
    """``err`` (a refusal of one of our fields, e.g. "method 'x': eps_high must …" or "top_p must …")
    restated under the config key(s) whose rows set that field; unchanged when none does."""
    text = " ".join(str(err).split())
    body = re.sub(r"^method '[^']*': ", "", text)
    match = re.match(r"([A-Za-z_]\w*)", body)
    if match is None:
        return text
    name = match.group(1)
    keys = [r for r in rows if r.field.split(".")[-1] == name and r.field != "—"]
    if not keys:
        return text
    row = keys[-1]
    return f"{row.key}={short_repr(row.value)} (mapped to {row.field}): {body}"


def check_deployment(deployment) -> None:
    """The deployment's frictions through their own validation (the ``truncated_sampling`` friction
    and the delay schedule, as a ``RunConfig`` builds them)."""
    from sandbox.runtime.build import build_frictions

    build_frictions([("truncated_sampling", {"top_p": deployment.top_p, "top_k": deployment.top_k,
                                             "report": deployment.report})], deployment.delay, named=False)
