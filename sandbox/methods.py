"""The one method table: every named method (an estimator with its baseline and controllers) as data.

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
  raw gradient (our choice of base loss: the text available offline does not name the paper's).
- **DG** (``dg``): the Delightful gradient at the reference launcher's η = 1, λ = 10⁻⁶.

A battery cell's own baseline applies unless the method names one.
"""

from __future__ import annotations

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


def _reserve() -> None:
    """The recipes' names are addressed where estimators' are (``score NAME``, ``--against``): a
    plugin estimator takes one only by override (``Registry.register``), and then is that name."""
    from sandbox.estimators import ESTIMATORS

    ESTIMATORS.reserve(RECIPES, "recipe")


_reserve()


def recipe_of(name: str) -> dict | None:
    """The built-in recipe ``name`` means, or None: not a recipe, or a plugin estimator took the name
    by ``--override`` (then every command uses the plugin's; plugins of ``$SANDBOX_PLUGINS`` read first)."""
    from sandbox.core.plugins import load_env_plugins, plugins_from_env
    from sandbox.estimators import ESTIMATORS

    if name not in RECIPES:
        return None
    if plugins_from_env():
        load_env_plugins()
    recipe = RECIPES[name]  # a recipe of the estimator of its own name ('dg') runs whatever holds that name
    return None if ESTIMATORS.taken_by_plugin(name) and recipe["estimator"] != name else recipe


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
    spec = recipe_of(name)
    if spec is None:
        if name not in ESTIMATORS.names():
            raise ValueError(f"unknown method {label_or_name!r}; methods: {sorted(LABELS.values())} or an estimator")
        spec = {"estimator": name}
    out = {k: v for k, v in spec.items()}
    if "controllers" in out:
        out["controllers"] = tuple((n, dict(k)) for n, k in out["controllers"])
    return out


__all__ = ["DEFAULT_AGAINST", "LABELS", "RECIPES", "label", "method", "recipe_of"]
