"""Recipes: a method of the one method table (``sandbox.methods``) or a registered estimator,
with settings — the unit a battery scores."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.methods import DEFAULT_AGAINST, RECIPES, recipe_of
from sandbox.runtime.config import _freeze

#: --set keys that address the recipe rather than the estimator's hyperparameters
RECIPE_KEYS = ("advantage", "advantage_kwargs", "controllers")


@dataclass(frozen=True)
class Recipe:
    """A method to score: ``name`` (its label) and the RunConfig fields it sets."""

    name: str
    estimator: str
    estimator_kwargs: dict = field(default_factory=dict)
    advantage: str | None = None  # None: the cell's baseline
    advantage_kwargs: dict = field(default_factory=dict)
    controllers: tuple = ()

    def run_fields(self) -> dict:
        """RunConfig fields: estimator, its kwargs, controllers and (when set) the baseline."""
        fields = {"estimator": self.estimator, "estimator_kwargs": dict(self.estimator_kwargs),
                  "controllers": tuple((n, dict(k)) for n, k in self.controllers)}
        if self.advantage is not None:
            fields.update(advantage=self.advantage, advantage_kwargs=dict(self.advantage_kwargs))
        return fields

    def to_dict(self) -> dict:
        return _freeze({k: getattr(self, k) for k in self.__dataclass_fields__})

    def check(self) -> None:
        """Build the estimator, baseline and controllers once: unknown names or rejected
        hyperparameters raise a one-line ``ValueError`` naming the method."""
        from sandbox.runtime.build import build_method

        try:
            build_method(self.estimator, self.estimator_kwargs, self.advantage, self.advantage_kwargs,
                         self.controllers, named=False)
        except TypeError as err:  # e.g. a plugin's own __init__ rejecting a keyword
            raise ValueError(f"method {self.name!r}: {err}") from None
        except ValueError as err:
            raise ValueError(f"method {self.name!r}: {str(err).splitlines()[0]}") from None


def recipe_names() -> list[str]:
    """Every name a method may have: the built-in recipes, then every registered estimator not
    among them (with its default settings; a plugin's once imported)."""
    from sandbox.estimators import ESTIMATORS

    return list(RECIPES) + [n for n in ESTIMATORS.names() if n not in RECIPES]


def make_recipe(name: str, settings: dict | None = None) -> Recipe:
    """The recipe ``name`` (a built-in recipe, else a registered estimator with default settings),
    with ``settings`` applied, e.g. ``{"eta": 0.5, "advantage": "grpo"}``: keys in ``RECIPE_KEYS``
    set the recipe, the others the estimator's hyperparameters."""
    from sandbox.estimators import ESTIMATORS

    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string (an estimator or recipe), got {name!r}")
    if name not in recipe_names():
        raise ValueError(f"unknown estimator {name!r}; recipes: {sorted(RECIPES)}; estimators: {ESTIMATORS.names()}")
    base = dict(recipe_of(name) or {"estimator": name})  # a plugin that took a recipe's name by --override: the plugin
    if not isinstance(settings, (dict, type(None))):
        raise ValueError(f"settings must be a dict of hyperparameters, got {type(settings).__name__}")
    settings = dict(settings or {})
    kwargs = dict(base.get("estimator_kwargs", {}))
    for key, value in settings.items():
        if key in RECIPE_KEYS:
            base[key] = value
        else:
            kwargs[key] = value
    controllers = tuple((n, dict(k)) for n, k in base.get("controllers", ()))
    recipe = Recipe(name=name, estimator=base["estimator"], estimator_kwargs=kwargs, advantage=base.get("advantage"),
                    advantage_kwargs=dict(base.get("advantage_kwargs", {})), controllers=controllers)
    recipe.check()
    return recipe


__all__ = ["DEFAULT_AGAINST", "RECIPE_KEYS", "RECIPES", "Recipe", "make_recipe", "recipe_names"]
