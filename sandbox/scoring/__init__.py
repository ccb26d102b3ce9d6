"""Scoring an estimator against the built-ins on a battery of frictions (``sandbox score``).

``score(name, ...)`` runs (or reuses) every (method, cell) job and returns a tidy frame; batteries
are data in ``sandbox/scoring/batteries/``; recipes (estimator + baseline + controllers) in
``sandbox.scoring.recipes``; statistics in ``sandbox.scoring.statistics``; the report in
``sandbox.scoring.report``.

The names below are imported on first use (PEP 562): importing a light submodule
(``sandbox.scoring.recipes`` for the argument parser's defaults) does not pull in ``score``'s
statistics and plots (scipy, matplotlib: about half a second).
"""

from __future__ import annotations

import importlib

#: where each public name lives
_HOME = {"score": "api", "Battery": "battery", "Cell": "battery", "battery_names": "battery",
         "load_battery": "battery", "DEFAULT_AGAINST": "recipes", "RECIPES": "recipes", "Recipe": "recipes",
         "make_recipe": "recipes", "recipe_names": "recipes"}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'sandbox.scoring' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sandbox.scoring.{_HOME[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])


__all__ = ["DEFAULT_AGAINST", "RECIPES", "Battery", "Cell", "Recipe", "battery_names", "load_battery",
           "make_recipe", "recipe_names", "score"]
