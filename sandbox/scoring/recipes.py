"""Recipes: an estimator with its baseline and controllers — the one method table.

``RECIPES`` holds every named method as data, and every figure (``simulations/``), battery and
scorecard takes its methods from it, so a name means one thing everywhere; a variant gets its own
name. As the papers define them (shared/spec/figures.md, "Transformer sequence tasks"):

- **PG** (``pg``): the Delightful papers' reference code's "reinforce" (google-deepmind/egg,
  ``experiments/dpg/run.py``: PPO with clip 10⁹), i.e. token-level importance sampling with the
  *recorded* μ, −sg(π_θ/μ)·A·log π_θ per token — untruncated ``tis`` at token level. On-policy
  it is REINFORCE.
- **REINFORCE** (``reinforce``): −A·log π_θ with no ratio at all.
- **IS-PG** (``is_pg``): exact sequence importance sampling with the reported μ.
- **TIS** (``tis``): truncated IS, C = 2.
- **PPO** (``ppo``): clip 0.2, π_prox = μ. **PMPO** (``pmpo``): α = ½.
- **VCPO** (``vcpo``, arXiv 2602.17616): sequence-level truncated IS with C = 8, the
  minimum-variance baseline b* = Σ ρ²·R / Σ ρ² (the ρ² weights: per-sample gradient norms are not
  available on every task) and the ESS-scaled step.
- **GAC** (``gac``, arXiv 2603.01501): PPO plus gradient-alignment control against the previous
  raw gradient (the paper's setting is PPO-style clipped training).
- **DG** (``dg``): the Delightful gradient at the reference launcher's η = 1, λ = 10⁻⁶.

A cell's own baseline applies unless the recipe names one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.runtime.config import _freeze

RECIPES: dict[str, dict] = {
    "reinforce": {"estimator": "reinforce"},
    "pg": {"estimator": "tis", "estimator_kwargs": {"C": 1e9, "level": "token"}},  # C = 10⁹ never binds
    "is_pg": {"estimator": "is_pg"},
    "tis": {"estimator": "tis", "estimator_kwargs": {"C": 2.0}},
    "ppo": {"estimator": "ppo"},
    "pmpo": {"estimator": "pmpo"},
    "vcpo": {"estimator": "tis", "estimator_kwargs": {"C": 8.0, "level": "sequence"},
             "advantage": "min_variance", "advantage_kwargs": {"weights": "rho2"},
             "controllers": [["ess_lr", {}]]},
    "gac": {"estimator": "ppo", "controllers": [["gac", {}]]},
    "dg": {"estimator": "dg", "estimator_kwargs": {"eta": 1.0, "lam": 1e-6}},
}
#: the names figures and tables print
LABELS = {"reinforce": "REINFORCE", "pg": "PG", "is_pg": "IS-PG", "tis": "TIS", "ppo": "PPO", "pmpo": "PMPO",
          "vcpo": "VCPO", "gac": "GAC", "dg": "DG", "decoupled_ppo": "decoupled PPO"}
#: ``sandbox score``'s comparison methods by default
DEFAULT_AGAINST = ("reinforce", "is_pg", "tis", "ppo", "vcpo", "gac", "dg")


def label(name: str) -> str:
    """The printed name of a recipe or estimator: 'PG', 'DG', 'decoupled PPO'; else the name upper-cased."""
    return LABELS.get(name, name.upper())


def method(label_or_name: str) -> dict:
    """RunConfig fields of a method, by its printed label ('PG') or its name ('pg'); an estimator
    without a recipe runs with its defaults. Lists are tuples, as a RunConfig stores them."""
    from sandbox.estimators import ESTIMATORS

    by_label = {v: k for k, v in LABELS.items()}
    name = by_label.get(label_or_name, label_or_name)
    if name not in RECIPES and name not in ESTIMATORS.names() and name.lower() in ESTIMATORS.names():
        name = name.lower()  # an estimator by its printed label: 'DPPO'
    spec = RECIPES.get(name)
    if spec is None:
        if name not in ESTIMATORS.names():
            raise ValueError(f"unknown method {label_or_name!r}; methods: {sorted(LABELS.values())} or an estimator")
        spec = {"estimator": name}
    out = {k: v for k, v in spec.items()}
    if "controllers" in out:
        out["controllers"] = tuple((n, dict(k)) for n, k in out["controllers"])
    return out


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
        from sandbox.advantages import make_advantage
        from sandbox.controllers import make_controller
        from sandbox.estimators import make_estimator

        try:
            make_estimator(self.estimator, **self.estimator_kwargs)
            if self.advantage is not None:
                make_advantage(self.advantage, **self.advantage_kwargs)
            for name, kwargs in self.controllers:
                make_controller(name, **kwargs)
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
    base = dict(RECIPES.get(name, {"estimator": name}))
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
