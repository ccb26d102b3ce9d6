"""Plugins: user modules that register estimators, tasks or figures, and entry points.

One loader for every process — the command line (``--plugin``), the driver of a sweep, each local
worker, each Ray task and a notebook's kernel import them through ``import_plugins``.
``$SANDBOX_PLUGINS`` (``os.pathsep``-separated modules or ``.py`` files) lists them for the
processes a command starts; a registry asked for a name it does not know imports them first
(``load_env_plugins``), so ``make_estimator("clipped_adv_pg")`` finds a plugin's estimator.

What the package itself provides by name — its task modules, scoring batteries, figure families
and the figure registry (``simulations``) — is declared as entry points in ``pyproject.toml``
(``[project.entry-points."sandbox.tasks"]``, ``"sandbox.batteries"``, ``"sandbox.figures"``,
``"sandbox.figure_registry"``) and
found through ``entry_points_of``: no hand-kept list of module names, and an installed
distribution can add its own to a group.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

PLUGINS_ENV = "SANDBOX_PLUGINS"


class PluginError(ValueError):
    """A plugin that cannot be found or loaded (its own errors propagate as they are)."""


def plugins_from_env() -> list[str]:
    return [p for p in os.environ.get(PLUGINS_ENV, "").split(os.pathsep) if p]


def import_plugins(specs: Sequence[str]) -> None:
    """Import user modules (dotted names or paths to ``.py`` files) that register estimators,
    tasks or figures; a module imported before is not imported again. A ``.py`` file's folder goes
    on ``sys.path`` so that job functions in it resolve as ``"stem:function"``; a file named like a
    module imported already from elsewhere (``json.py``) is refused, not skipped."""
    if isinstance(specs, str):
        raise PluginError(f"plugins must be a list of modules or .py paths, got the string {specs!r}")
    for spec in specs:
        path = Path(spec)
        if path.suffix == ".py":
            if not path.is_file():
                raise PluginError(f"plugin file {spec!r} does not exist")
            loaded = sys.modules.get(path.stem)
            if loaded is not None:
                where = getattr(loaded, "__file__", None)
                if where and Path(where).resolve() == path.resolve():
                    continue
                raise PluginError(f"plugin file {spec!r}: its name {path.stem!r} is taken by the module "
                                  f"{path.stem} ({where or 'built in'}); rename the file, e.g. my_{path.name}")
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module
            try:
                module_spec.loader.exec_module(module)
            except SystemExit as err:
                del sys.modules[path.stem]
                raise _exited(spec, err) from None
            except BaseException:
                del sys.modules[path.stem]
                raise
            continue
        try:
            importlib.import_module(spec)
        except ModuleNotFoundError as err:
            raise PluginError(f"plugin module {spec!r} cannot be imported: {err}") from err
        except SystemExit as err:
            raise _exited(spec, err) from None


def _exited(spec: str, err: SystemExit) -> PluginError:
    """A plugin that called ``sys.exit()`` while being imported (it would end the command silently)."""
    return PluginError(f"plugin {spec!r} failed to load: it called sys.exit({'' if err.code is None else repr(err.code)}) "
                       "while being imported")


def load_env_plugins() -> None:
    """Import ``$SANDBOX_PLUGINS``; a failure names the variable and the entry (any error of the
    plugin's own code included)."""
    for spec in plugins_from_env():
        try:
            import_plugins([spec])
        except PluginError as err:
            raise PluginError(f"{PLUGINS_ENV}: {err}") from None
        except Exception as err:  # the plugin's own code failed: name it, one line
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise PluginError(f"{PLUGINS_ENV}: plugin {spec!r} failed to load: {type(err).__name__}: {first}") from None


def entry_points_of(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name, not loaded (``.load()`` imports one). They are read
    from the installed metadata: after adding one to pyproject.toml, ``pip install -e .`` again."""
    found = {ep.name: ep for ep in entry_points(group=group)}
    if not found:
        raise PluginError(f"no entry points in group {group!r}: sandbox is not installed, or installed from "
                          "an older pyproject.toml; run `pip install -e .` in the repository")
    return dict(sorted(found.items()))
