"""Name → class registries for estimators, advantages and controllers.

A registry maps a short name to a frozen dataclass whose fields are its hyperparameters.
``make(name, **kwargs)`` validates the name and the keyword names before construction, so a typo
raises a ``ValueError`` that lists the valid options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import os

from sandbox.core.plugins import PLUGINS_ENV, load_env_plugins, plugins_from_env
from sandbox.core.usage import note

T = TypeVar("T")

#: names a plugin may take from a built-in (``--override NAME``, ``os.pathsep``- or comma-separated)
OVERRIDE_ENV = "SANDBOX_OVERRIDE"
#: the packages whose registrations are built-ins; anything else registering is a plugin
BUILTIN_PACKAGES = ("sandbox", "simulations")


def overrides() -> set[str]:
    """The built-in names the user lets a plugin take (``$SANDBOX_OVERRIDE``, set by ``--override``;
    worker processes inherit it, so every process resolves a name to the same object)."""
    return {n.strip() for n in os.environ.get(OVERRIDE_ENV, "").replace(os.pathsep, ",").split(",") if n.strip()}


def is_builtin(cls: type) -> bool:
    return cls.__module__.split(".")[0] in BUILTIN_PACKAGES


class Registry(Generic[T]):
    """A named collection of dataclass types, filled with the ``register`` decorator."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, type[T]] = {}
        #: imports the built-ins registered lazily (tasks: their entry points), before a plugin registers
        self.load_builtins: Callable[[], None] | None = None
        self._loading = False
        self._reserved: dict[str, str] = {}  # name → what built-in of another kind holds it in this namespace

    def reserve(self, names, what: str) -> None:
        """Names a built-in of another kind holds where this registry's names are used too (a recipe
        is addressed where an estimator is): a plugin takes one only as it takes a built-in's."""
        self._reserved.update({name: what for name in names})

    def builtin(self, name: str) -> str | None:
        """What built-in holds ``name`` ("recipe 'gac'", "estimator 'dg' (sandbox.estimators…)"), or None."""
        cls = self._entries.get(name)
        if cls is not None and is_builtin(cls):
            return f"{self.kind} {name!r} ({cls.__module__}.{cls.__qualname__})"
        return f"{self._reserved[name]} {name!r}" if name in self._reserved else None

    def taken_by_plugin(self, name: str) -> bool:
        """A plugin took the built-in name ``name`` (by override): every command must use the plugin's."""
        cls = self._entries.get(name)
        return cls is not None and not is_builtin(cls) and name in self._reserved

    def register(self, name: str, *, replace: bool = False) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@registry.register("name")``.

        Registering a name twice raises unless ``replace=True`` (so that a user's module cannot
        silently shadow a built-in). The one rule for names (issue 46, R4): a plugin (a class from
        outside ``BUILTIN_PACKAGES``) takes a built-in's name — this registry's, or one reserved by a
        built-in of another kind (``reserve``: a recipe) — only when told to: ``replace=True`` in
        its code, or the user's ``--override NAME`` (``$SANDBOX_OVERRIDE``); else one ``ValueError``
        line naming the clash and the flag.
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{self.kind} name must be a Python identifier, got {name!r}")

        def decorator(cls: type[T]) -> type[T]:
            if not dataclasses.is_dataclass(cls):
                raise ValueError(
                    f"{self.kind} {name!r} must be a dataclass (decorate with @dataclass(frozen=True) "
                    "below the register decorator)"
                )
            plugin = not is_builtin(cls)
            if plugin and self.load_builtins is not None and not self._loading:
                self._loading = True  # the built-ins' names known before a plugin's is judged
                try:
                    self.load_builtins()
                finally:
                    self._loading = False
            held = self.builtin(name)
            allowed = replace or (plugin and name in overrides())
            if not plugin and name in self._entries and not is_builtin(self._entries[name]) and name in overrides():
                cls.name = name  # type: ignore[attr-defined]
                return cls  # a built-in imported after the plugin that took its name by override: the plugin's stays
            if plugin and held and not allowed and self._entries.get(name) is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} of the plugin {cls.__module__}.{cls.__qualname__} takes the name of "
                    f"the built-in {held}; a plugin takes a built-in name only when told to: --override {name} "
                    f"(${OVERRIDE_ENV}={name}), or register it with replace=True"
                )
            if name in self._entries and not allowed and self._entries[name] is not cls:
                raise ValueError(
                    f"{self.kind} name {name!r} is already registered by "
                    f"{self._entries[name].__module__}.{self._entries[name].__qualname__}; "
                    "pass replace=True to override it"
                )
            cls.name = name  # type: ignore[attr-defined]
            self._entries[name] = cls
            return cls

        return decorator

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``; a name not registered yet is looked for in the plugins
        of ``$SANDBOX_PLUGINS`` (imported then) before it is refused."""
        if name not in self._entries and plugins_from_env():
            load_env_plugins()
        if name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self._entries)} (a plugin's "
                             f"{self.kind} is known once its module is imported: import it, or list its file "
                             f"in ${PLUGINS_ENV})")
        return self._entries[name]

    def make(self, name: str, **kwargs: Any) -> T:
        cls = self.get(name)
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(kwargs) - fields)
        if unknown:
            raise ValueError(
                f"unknown hyperparameter(s) {unknown} for {self.kind} {name!r}; valid: {sorted(fields)}"
            )
        note(self.kind, name, cls, kwargs)  # a job's components (sandbox.core.usage)
        return cls(**kwargs)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def in_order(self) -> tuple[str, ...]:
        """The names in the order they were registered (built-ins first)."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, one-line description, defaults) for every entry, sorted by name. An entry's
        ``authors_defaults`` class attribute (where it has one) is appended to its defaults as
        "; authors: …": the values the method's authors recommend, with their source."""
        rows = []
        for name in self.names():
            cls = self._entries[name]
            paragraph = _docstring(cls).split("\n\n")[0]
            summary = " ".join(line.strip() for line in paragraph.splitlines())
            defaults = []
            for f in dataclasses.fields(cls):
                if not f.init:
                    continue
                if f.default is not dataclasses.MISSING:
                    value = f.default
                elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                    value = f.default_factory()  # type: ignore[misc]
                else:
                    defaults.append(f"{f.name}=<required>")
                    continue
                if isinstance(value, (str, int, float, bool, tuple, list, dict, type(None))):
                    defaults.append(f"{f.name}={value!r}")  # (runtime objects such as a task's frictions are not knobs)
            text = ", ".join(defaults)
            authors = getattr(cls, "authors_defaults", "")
            if authors:
                text = f"{text}; authors: {authors}"
            rows.append((name, summary, text))
        return rows


def _docstring(cls: type) -> str:
    """The first docstring written by hand along the MRO (dataclasses generate a signature)."""
    for klass in cls.__mro__:
        doc = (klass.__dict__.get("__doc__") or "").strip()
        if doc and not doc.startswith(f"{klass.__name__}("):
            return doc
    return ""
