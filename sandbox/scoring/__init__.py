"""Scoring an estimator against the built-ins on a battery of frictions (``sandbox score``).

``score(name, ...)`` runs (or reuses) every (method, cell) job and returns a tidy frame; batteries
are data in ``sandbox/scoring/batteries/``; recipes (estimator + baseline + controllers) in
``sandbox.scoring.recipes``; statistics in ``sandbox.scoring.statistics``; the report in
``sandbox.scoring.report``.
"""

from sandbox.scoring.api import score
from sandbox.scoring.battery import Battery, Cell, battery_names, load_battery
from sandbox.scoring.recipes import DEFAULT_AGAINST, RECIPES, Recipe, make_recipe, recipe_names

__all__ = ["DEFAULT_AGAINST", "RECIPES", "Battery", "Cell", "Recipe", "battery_names", "load_battery",
           "make_recipe", "recipe_names", "score"]
