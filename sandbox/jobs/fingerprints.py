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
friction without a canary strength) is fingerprinted by its source file's bytes instead. Numeric
settings select code paths too (DG's KL term only when ``kl_coef`` > 0): an estimator's,
baseline's and controller's *path fingerprint* hashes its canary with each numeric or flag field
in turn moved off its value (``canaries.off_values``), and results record it. A path no canary
takes (a task's or friction's numeric setting) is not seen: ``sandbox.core.numerics.NUMERICS``,
bumped by hand, still invalidates every result.

Canaries are exact bytes, and the last bits of a float depend on the CPU (its ATen capability sums
in another order, MKL dispatches by vendor). So each component has two fingerprints: the *exact*
one and a *portable* one (``sandbox.jobs.canaries.Digests``: floats rounded to 2⁻³² of their
tensor's scale for float64 canaries, 2⁻⁸ for float32 ones, a tiny run's floats after its first
Adam update left out), and every result records the ``platform()`` that made it. A result is
checked by its exact fingerprints on its own platform, and by the portable ones on another
(``changed``): a mixed-CPU cluster, or the committed data on another machine, agree.
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
    from sandbox.tasks import TASKS

    return {"estimator": ESTIMATORS, "advantage": ADVANTAGES, "controller": CONTROLLERS, "friction": FRICTIONS,
            "task": TASKS, "sequence problem": SEQUENCE_ENVS, "text environment": TEXT_ENVS}


def class_of(kind: str, name: str) -> type | None:
    """The registered class of a component (None for the optimiser, schedule, runtime or unknown names);
    a task not registered yet is looked for in the tasks' entry points (``load_tasks``)."""
    registry = _registries().get(kind)
    if kind == "task" and registry is not None and name not in registry:
        from sandbox.tasks import load_tasks

        load_tasks(name)
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
    """The exact fingerprint of a component key (``sandbox.core.usage.component_key``), 16 hex
    digits; computed once per process and class (a plugin registered over a name later in the
    process is fingerprinted afresh)."""
    kind, name, _ = parse_key(key)
    return _fingerprint(key, class_of(kind, name))[0]


def portable_fingerprint(key: str) -> str:
    """The portable fingerprint of a component key (the module docstring): the same on every CPU."""
    kind, name, _ = parse_key(key)
    return _fingerprint(key, class_of(kind, name))[1]


def path_fingerprint(key: str) -> str:
    """The path fingerprint of a component key: its canary with each numeric or flag setting in
    turn moved off its value, portably hashed ('' for kinds whose canary has no such variants)."""
    kind, name, _ = parse_key(key)
    return _fingerprint(key, class_of(kind, name))[2]


@functools.lru_cache(maxsize=1)
def platform() -> str:
    """What the last bits of a canary depend on: ATen's CPU capability, the torch build, the CPU model."""
    import platform as host

    import torch

    model = host.processor() or host.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{torch.backends.cpu.get_cpu_capability()} torch {torch.__version__} {model}"


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


_known: dict[tuple[str, type | None], tuple[str, str, str]] = {}  # this process's (exact, portable, path) fingerprints


def _fingerprint(key: str, cls: type | None) -> tuple[str, str, str]:
    """Computed once per process; within ``shared_fingerprints``, once per run: taken from the
    run's folder when another process left it there, and left there for the others."""
    shared = _shared_path(key, cls)
    value = _known.get((key, cls))
    if value is None and shared is not None and shared.is_file():
        value = tuple(shared.read_text().split(" "))
    if value is None or len(value) != 3:
        value = _compute(key, cls)
    _known[(key, cls)] = value
    if shared is not None and not shared.is_file():  # written whole, then renamed: never read half-written
        partial = shared.with_name(f"{shared.name}.{os.getpid()}.tmp")
        partial.write_text(" ".join(value))  # (a path fingerprint may be '': split on single spaces)
        partial.replace(shared)
    return value


def _compute(key: str, cls: type | None) -> tuple[str, str, str]:
    import torch

    from sandbox.jobs.canaries import CANARIES, Digests

    kind, name, settings = parse_key(key)
    digest = Digests(key.encode() + b"\0" + origin(cls).encode() + b"\0")
    digest.paths = Digests(key.encode() + b"\0" + origin(cls).encode() + b"\0paths\0")
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
        source = hashlib.sha256(key.encode() + b"\0" + origin(cls).encode() + b"\0src\0" + _source(kind, cls))
        return source.hexdigest()[:16], source.hexdigest()[:16], ""
    paths = digest.paths.portable.hexdigest()[:16] if digest.paths.fed else ""
    return digest.exact.hexdigest()[:16], digest.portable.hexdigest()[:16], paths


def fingerprints(keys: Iterable[str]) -> dict[str, str]:
    """{key: exact fingerprint} for ``keys``, sorted."""
    return {key: fingerprint(key) for key in sorted(set(keys))}


def portable_fingerprints(keys: Iterable[str]) -> dict[str, str]:
    """{key: portable fingerprint} for ``keys``, sorted."""
    return {key: portable_fingerprint(key) for key in sorted(set(keys))}


def path_fingerprints(keys: Iterable[str]) -> dict[str, str]:
    """{key: path fingerprint} for those of ``keys`` that have one, sorted."""
    return {key: value for key in sorted(set(keys)) if (value := path_fingerprint(key))}


def changed(stored: dict[str, str], portable: dict[str, str] | None = None,
            made_on: str | None = None, paths: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """The components whose numbers differ from those of a result: {key: (stored, now)}. ``stored``
    are its exact fingerprints; made on another ``platform()`` (``made_on``), a component whose
    exact fingerprint differs is compared by its ``portable`` one instead (a result that records
    neither is judged by its exact fingerprints). ``paths``: its path fingerprints, compared too
    (results written before issue 46 have none)."""
    out = {}
    for key, value in (paths or {}).items():
        if path_fingerprint(key) != value:
            out[key] = (value, path_fingerprint(key))
    elsewhere = portable is not None and made_on is not None and made_on != platform()
    for key, value in stored.items():
        now = fingerprint(key)
        if now == value or key in out:
            continue
        if elsewhere and key in portable:
            if portable[key] == portable_fingerprint(key):
                continue
            out[key] = (portable[key], portable_fingerprint(key))
        else:
            out[key] = (value, now)
    return out


def portable_stamp(code: dict) -> dict | None:
    """A result's ``code`` stamp written before portable fingerprints, with them and this
    ``platform()`` added — only where this machine reproduces its exact fingerprints (the same
    canary bits, so the portable ones are theirs); None where it does not, or nothing is to add.
    For re-stamping committed data so that other CPUs judge it by its portable fingerprints."""
    prints = code.get("fingerprints")
    if not prints or "portable" in code or changed(prints):
        return None
    return {**code, "portable": portable_fingerprints(prints), "platform": platform()}


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


__all__ = ["SHARED", "changed", "class_of", "configs_in", "fingerprint", "fingerprints", "origin", "platform",
           "path_fingerprint", "path_fingerprints", "portable_fingerprint", "portable_fingerprints", "portable_stamp",
           "reset", "shared_fingerprints", "static_components"]
