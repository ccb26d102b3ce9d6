"""Numeric fingerprints: what a stored result's numbers depend on, caught by numbers, not by memory.

Every job records the components it built (``sandbox.core.usage``: its task, estimator, baseline,
controllers, frictions, optimiser, delay schedule and the runtime loop, each with the settings
that select a code path). A component's fingerprint is a sha256 of its canary evaluations
(``sandbox.jobs.canaries``: seeded, tiny, one CPU thread, so deterministic) and, for a class that
is not the sandbox's own (a plugin, even one registered over a built-in name with
``replace=True``), its module and name: a replaced method is a different method in the store.
Every result stores the fingerprints of its components; a result is reused while they all match
(``changed``), so a refactor that keeps the numbers keeps every result, and an edit that changes
them invalidates exactly the results of the components it changed, which the sweep names.

A component whose canary cannot run here (its data or an optional dependency is missing, or a
friction without a canary strength) is fingerprinted by its source file's bytes instead. A change
confined to a code path no canary takes (a setting that is not text or a flag) is not seen:
``sandbox.core.numerics.NUMERICS``, bumped by hand, still invalidates every result.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox.core.usage import parse_key, paused

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _registries() -> dict:
    from sandbox.advantages import ADVANTAGES
    from sandbox.controllers import CONTROLLERS
    from sandbox.envs.sequences.base import SEQUENCE_ENVS
    from sandbox.envs.text import TEXT_ENVS
    from sandbox.estimators import ESTIMATORS
    from sandbox.frictions import FRICTIONS
    from sandbox.tasks import TASKS, load_tasks

    load_tasks()
    return {"estimator": ESTIMATORS, "advantage": ADVANTAGES, "controller": CONTROLLERS, "friction": FRICTIONS,
            "task": TASKS, "sequence problem": SEQUENCE_ENVS, "text environment": TEXT_ENVS}


def class_of(kind: str, name: str) -> type | None:
    """The registered class of a component (None for the optimiser, schedule, runtime or unknown names)."""
    registry = _registries().get(kind)
    return registry.get(name) if registry is not None and name in registry else None


def origin(cls: type | None) -> str:
    """'' for the sandbox's own classes, else where the class comes from (module.qualname)."""
    if cls is None or cls.__module__.split(".")[0] == "sandbox":
        return ""
    return f"{cls.__module__}.{cls.__qualname__}"


def _source(kind: str, cls: type | None) -> bytes:
    """The bytes a component without a canary is fingerprinted by: its class's module file, or
    (nothing narrower known) every source file of the package."""
    try:
        return Path(inspect.getsourcefile(cls)).read_bytes()
    except (TypeError, OSError):
        return _package_source()


@functools.lru_cache(maxsize=1)
def _package_source() -> bytes:
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.digest()


def fingerprint(key: str) -> str:
    """The fingerprint of a component key (``sandbox.core.usage.component_key``), 16 hex digits;
    computed once per process and class (a plugin registered over a name later in the process
    is fingerprinted afresh)."""
    kind, name, _ = parse_key(key)
    return _fingerprint(key, class_of(kind, name))


#: the folder through which the processes of one run share their fingerprints (``shared_fingerprints``)
SHARED = "SANDBOX_FINGERPRINTS"
_own_only = False  # set by ``reset``: this process's components may differ from its run's other processes'


@contextmanager
def shared_fingerprints() -> Iterator[None]:
    """Within, this process and the processes it starts (sweep workers, notebook kernels) compute
    each fingerprint once between them: the first to compute one leaves it in a folder named by
    ``$SANDBOX_FINGERPRINTS``, the others read it. They run the same code on the same machine at
    the same time, so the canary would give them the same bytes (a canary loading a pretrained
    model takes half a minute). Nested uses share the outer folder."""
    if os.environ.get(SHARED):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="sandbox-fingerprints-") as folder:
        os.environ[SHARED] = folder
        try:
            yield
        finally:
            os.environ.pop(SHARED, None)


def _shared_path(key: str, cls: type | None) -> Path | None:
    folder = os.environ.get(SHARED)
    if not folder or _own_only or not Path(folder).is_dir():
        return None
    return Path(folder) / hashlib.sha256(key.encode() + b"\0" + origin(cls).encode()).hexdigest()


_known: dict[tuple[str, type | None], str] = {}  # this process's fingerprints


def _fingerprint(key: str, cls: type | None) -> str:
    """Computed once per process; within ``shared_fingerprints``, once per run: taken from the
    run's folder when another process left it there, and left there for the others."""
    shared = _shared_path(key, cls)
    value = _known.get((key, cls))
    if value is None and shared is not None and shared.is_file():
        value = shared.read_text()
    if value is None:
        value = _compute(key, cls)
    _known[(key, cls)] = value
    if shared is not None and not shared.is_file():  # written whole, then renamed: never read half-written
        partial = shared.with_name(f"{shared.name}.{os.getpid()}.tmp")
        partial.write_text(value)
        partial.replace(shared)
    return value


def _compute(key: str, cls: type | None) -> str:
    import torch

    from sandbox.jobs.canaries import CANARIES

    kind, name, settings = parse_key(key)
    digest = hashlib.sha256(key.encode() + b"\0" + origin(cls).encode() + b"\0")
    exercised = False
    if kind in CANARIES:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the same bytes on every run
        try:
            with paused():  # the canary's own components are not the job's
                exercised = CANARIES[kind](name, settings, digest)
        except Exception as err:  # noqa: BLE001 — a canary that cannot run here: fingerprint by source
            log.info("the canary of %s cannot run here (%s: %s); fingerprinting it by its source", key,
                     type(err).__name__, err)
            exercised = False
        finally:
            torch.set_num_threads(threads)
    if not exercised:
        digest = hashlib.sha256(key.encode() + b"\0" + origin(cls).encode() + b"\0src\0" + _source(kind, cls))
    return digest.hexdigest()[:16]


def fingerprints(keys: Iterable[str]) -> dict[str, str]:
    """{key: fingerprint} for ``keys``, sorted."""
    return {key: fingerprint(key) for key in sorted(set(keys))}


def changed(stored: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The components whose fingerprint differs from ``stored``: {key: (stored, now)}."""
    out = {}
    for key, value in stored.items():
        now = fingerprint(key)
        if now != value:
            out[key] = (value, now)
    return out


def configs_in(params: dict) -> list[dict]:
    """The run configs a job's parameters hold: the parameters themselves when they name a task
    (RunConfig fields, perhaps beside others such as a Ray ``async_config``), and every dict value
    that does (``{"config": …}``)."""
    from sandbox.runtime.config import RunConfig

    fields = {f.name for f in dataclasses.fields(RunConfig)}
    found = []
    for candidate in (params, *(v for v in params.values() if isinstance(v, dict))):
        if isinstance(candidate.get("task"), str):
            found.append({k: v for k, v in candidate.items() if k in fields})
    return found


def static_components(params: dict) -> set[str] | None:
    """The components a job's run configs build (what it records when it runs, found without
    running it), or None when its parameters hold no run config."""
    from sandbox.core.usage import recording
    from sandbox.runtime.build import build
    from sandbox.runtime.config import RunConfig

    configs = configs_in(params)
    if not configs:
        return None
    with recording() as used:  # a config's validation notes nothing: its build notes what a run makes
        for config in configs:
            build(RunConfig.from_dict(config))
    return used


def reset() -> None:
    """Forget this process's fingerprints (after a plugin or a test replaced a component), and
    compute its own from then on instead of reading its run's shared ones."""
    global _own_only
    _own_only = True
    _known.clear()


__all__ = ["SHARED", "changed", "class_of", "configs_in", "fingerprint", "fingerprints", "origin", "reset",
           "shared_fingerprints", "static_components"]
