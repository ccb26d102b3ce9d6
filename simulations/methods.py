"""Methods as the papers define them: one definition of each, shared by every simulation family
(RunConfig fields; shared/spec/figures.md, "Transformer sequence tasks").

- **PG**: the reference code's "reinforce" (google-deepmind/egg, ``experiments/dpg/run.py``: PPO
  with clip 10⁹), i.e. token-level importance sampling with the *recorded* μ,
  loss −sg(π_θ/μ)·A·log π_θ per token — untruncated ``tis`` at token level. On-policy it is
  REINFORCE.
- **REINFORCE**: −A·log π_θ with no ratio at all (its own method, its own label).
- **DG**: Delightful gradient at the reference launcher's η = 1, λ = 10⁻⁶.
- **VCPO** (arXiv 2602.17616): sequence-level truncated IS with C = 8, the minimum-variance
  baseline b* = Σ ρ²·R / Σ ρ² (the ρ² weights: per-sample gradient norms are not affordable) and the
  ESS-scaled step (``ess_lr``).
- **GAC** (arXiv 2603.01501): PPO plus gradient-alignment control against the previous raw
  gradient (``gac``, its default ``memory='raw'``).
"""

from __future__ import annotations

#: the reference's untruncated token-level IS: C = 10⁹ never binds (as its PPO clip of 10⁹)
PG = {"estimator": "tis", "estimator_kwargs": {"C": 1e9, "level": "token"}}
REINFORCE = {"estimator": "reinforce"}
DG = {"estimator": "dg", "estimator_kwargs": {"eta": 1.0, "lam": 1e-6}}
VCPO = {"estimator": "tis", "estimator_kwargs": {"C": 8.0, "level": "sequence"},
        "advantage": "min_variance", "advantage_kwargs": {"weights": "rho2"}, "controllers": (("ess_lr", {}),)}
GAC = {"estimator": "ppo", "controllers": (("gac", {}),)}

__all__ = ["DG", "GAC", "PG", "REINFORCE", "VCPO"]
