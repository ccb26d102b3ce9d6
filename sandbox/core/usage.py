"""Which components a computation used: the names a job's numbers depend on.

Every registry ``make`` (estimators, advantages, controllers, frictions, tasks …) and every run
config (its optimiser, delay schedule and the runtime loop) calls ``note``; inside ``recording()``
the component keys are collected, so a job records the components it really built — a figure's
table of estimators as well as a training run. ``sandbox.jobs.fingerprints`` gives each key a
fingerprint (a hash of seeded canary evaluations) that every stored result keeps.

A key is ``kind:name`` plus the settings that select a code path rather than a size — the text,
flag and ``None`` values given that differ from the class's defaults — in brackets, e.g.
``task:reverse_copy[backward=screened]`` or ``estimator:kondo[priority=uniform]``: a canary with
tiny sizes then runs the same code as the job did.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_RECORDERS: list[set[str]] = []


def _selector(value: Any) -> bool:
    """Whether a setting selects a code path (text, a flag, None, a tuple of texts) rather than a size."""
    if value is None or isinstance(value, (str, bool)):
        return True
    return isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)


def _defaults(cls: type | None) -> dict[str, Any]:
    if cls is None or not dataclasses.is_dataclass(cls):
        return {}
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def selectors(cls: type | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The code-path settings of ``kwargs`` (those that differ from ``cls``'s defaults)."""
    defaults = _defaults(cls)
    out = {}
    for name, value in kwargs.items():
        if not _selector(value):
            continue
        value = list(value) if isinstance(value, (tuple, list)) else value
        default = defaults.get(name, dataclasses.MISSING)
        if isinstance(default, (tuple, list)):
            default = list(default)
        if value != default:
            out[name] = value
    return dict(sorted(out.items()))


def component_key(kind: str, name: str, settings: Mapping[str, Any] | None = None) -> str:
    """``kind:name`` or ``kind:name[k=v,…]`` (values as JSON)."""
    key = f"{kind}:{name}"
    if settings:
        key += "[" + ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(settings.items())) + "]"
    return key


def parse_key(key: str) -> tuple[str, str, dict[str, Any]]:
    """(kind, name, settings) of a ``component_key``."""
    head, _, rest = key.partition("[")
    kind, _, name = head.partition(":")
    settings: dict[str, Any] = {}
    if rest:
        for item in _split(rest[:-1]):
            k, _, v = item.partition("=")
            settings[k] = json.loads(v)
    return kind, name, settings


def _split(text: str) -> list[str]:
    """Split ``k=v,k=v`` at the commas outside JSON brackets and strings."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "[{":
            depth += 1
        elif not quoted and ch in "]}":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def note(kind: str, name: str, cls: type | None = None, kwargs: Mapping[str, Any] | None = None) -> None:
    """Record that a component was built (a no-op outside ``recording()``)."""
    if _RECORDERS:
        key = component_key(kind, name, selectors(cls, kwargs or {}))
        for used in _RECORDERS:
            used.add(key)


@contextmanager
def recording() -> Iterator[set[str]]:
    """Collect the keys of the components built inside the block."""
    used: set[str] = set()
    _RECORDERS.append(used)
    try:
        yield used
    finally:
        _RECORDERS.remove(used)


@contextmanager
def paused() -> Iterator[None]:
    """Record nothing inside the block (a fingerprint's canary builds components of its own)."""
    saved = list(_RECORDERS)
    _RECORDERS.clear()
    try:
        yield
    finally:
        _RECORDERS[:] = saved


__all__ = ["component_key", "note", "parse_key", "paused", "recording", "selectors"]
