"""Exact-gradient probes on a single-context K-armed bandit: no sampling noise.

Each seed draws a problem instance — the correct arm y and the learner's logits z with
π(y) = ``p_correct`` (the other arms share the rest by a random softmax) — and an actor μ:

- ``point_mass``: rare failures, μ = (1 − ρ)π + ρ·e_w for a random wrong arm w (an actor bug);
- ``discovery``: rare successes, μ = (1 − ρ)π + ρ·e_y;
- ``stale``: an older policy with μ(y) = ``p_actor`` and its own random wrong arms;
- ``on_policy``: μ = π.

The actor reports μ exactly; the baseline is the learner's value V = π(y). Every single-sample
update g(a) = −∇_z loss(a) (a batch of one) is computed by autograd through the estimator, so the
expectations over a ∼ μ are exact sums. With u = ∇J/‖∇J‖ (∇J = π(y)(e_y − π)), the score of a
batch of B samples is the signal fraction

    s = max(0, E[g]·u)² / E‖ĝ_B‖²,   E‖ĝ_B‖² = ‖E g‖² + (E‖g‖² − ‖E g‖²)/B,

in [0, 1] by Cauchy–Schwarz: 1 for a noiseless update along ∇J, 0 for one with no signal. It
combines the alignment cos(E g, ∇J) (B → ∞: s = cos₊²) and the perpendicular second moment
E‖g_⊥‖² (both reported). Controllers and the recipe's baseline act on whole updates and are not
probed: only the estimator is.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from sandbox.core.seeding import derived_generator
from sandbox.core.validation import NonFiniteError, check_choice, check_range
from sandbox.diagnostics import cosine, perpendicular
from sandbox.envs.bandits import exact_pg
from sandbox.estimators import PGTerms
from sandbox.runtime.build import build_method

ACTORS = ("on_policy", "point_mass", "discovery", "stale")
DTYPE = torch.float64


def _policy(p_y: float, y: int, K: int, generator: torch.Generator) -> torch.Tensor:
    """Probabilities [K] with π(y) = p_y and the rest split by a softmax of N(0, 1) logits."""
    rest = torch.softmax(torch.randn(K - 1, generator=generator, dtype=DTYPE), -1) * (1 - p_y)
    return torch.cat([rest[:y], torch.tensor([p_y], dtype=DTYPE), rest[y:]])


def instance(K: int, p_correct: float, actor: str, rho: float, p_actor: float,
             generator: torch.Generator) -> tuple[torch.Tensor, int, torch.Tensor]:
    """(learner logits z [K], correct arm y, actor probabilities μ [K]) of one probe instance."""
    check_range("K", K, low=2)
    check_range("p_correct", p_correct, low=0.0, high=1.0, low_open=True, high_open=True)
    check_range("rho", rho, low=0.0, high=1.0)
    check_range("p_actor", p_actor, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice("actor", actor, ACTORS)
    y = int(torch.randint(0, K, (1,), generator=generator))
    pi = _policy(p_correct, y, K, generator)
    wrong = [a for a in range(K) if a != y][int(torch.randint(0, K - 1, (1,), generator=generator))]
    mixtures = {
        "on_policy": lambda: pi,
        "point_mass": lambda: (1 - rho) * pi + rho * torch.nn.functional.one_hot(torch.tensor(wrong), K).to(DTYPE),
        "discovery": lambda: (1 - rho) * pi + rho * torch.nn.functional.one_hot(torch.tensor(y), K).to(DTYPE),
        "stale": lambda: _policy(p_actor, y, K, generator),
    }
    return pi.log(), y, mixtures[actor]()


def single_sample_updates(estimator, z: torch.Tensor, y: int, mu: torch.Tensor,
                          generator: torch.Generator | None = None) -> torch.Tensor:
    """g(a) = −∇_z loss for a batch of one sample of each action a, ``[K, K]`` (row a);
    ``generator`` feeds estimators that draw random numbers (``clip_cov``)."""
    K = z.shape[-1]
    logits = z.detach().expand(K, 1, K).clone().requires_grad_(True)  # one population member per action
    logp = torch.log_softmax(logits, -1).gather(-1, torch.arange(K).view(K, 1, 1))
    value = float(torch.softmax(z, -1)[y])
    advantages = (torch.nn.functional.one_hot(torch.tensor(y), K).to(DTYPE) - value).view(K, 1)
    behavior = mu.log().view(K, 1, 1)
    terms = PGTerms(logp=logp, advantages=advantages, behavior_logp=behavior, proximal_logp=behavior,
                    group=torch.zeros(1, dtype=torch.long), generator=generator)
    (grad,) = torch.autograd.grad(estimator(terms).loss, logits)
    return -grad[:, 0, :]


def probe_metrics(estimator, z: torch.Tensor, y: int, mu: torch.Tensor, B: int,
                  generator: torch.Generator | None = None) -> dict[str, float]:
    """Alignment, perpendicular second moment and the signal fraction of one instance."""
    g = single_sample_updates(estimator, z, y, mu, generator)
    true = exact_pg(z.view(1, 1, -1), torch.tensor([[y]])).view(-1)
    u = true / true.norm()
    mean = (mu.unsqueeze(-1) * g).sum(0)
    second = (mu * g.pow(2).sum(-1)).sum()
    perp = (mu * perpendicular(g, true.expand_as(g)).pow(2).sum(-1)).sum()
    batch_second = mean.pow(2).sum() + (second - mean.pow(2).sum()) / B
    signal, total = float((mean * u).sum()), float(batch_second)
    if not (math.isfinite(signal) and math.isfinite(total)):
        fraction = math.nan  # a diverged update
    else:
        fraction = min(1.0, max(signal, 0.0) ** 2 / total) if total > 0 else 0.0
    return {"cos": float(cosine(mean, true)), "perp_moment": float(perp / true.pow(2).sum()),
            "signal_fraction": fraction}


def run_probe(cell: dict, recipe: dict, seed: int, seeds: int) -> pd.DataFrame:
    """One row per seed (instance): the probe's metrics and its score; a non-finite update is a
    diverged seed scoring 0."""
    probe = cell["probe"]
    estimator = build_method(recipe["estimator"], recipe["estimator_kwargs"], named=False).estimator
    rows = []
    for s in range(seeds):
        gen = derived_generator(seed, "probe", cell["name"], s)
        z, y, mu = instance(int(probe["K"]), float(probe["p_correct"]), probe.get("actor", "on_policy"),
                            float(probe.get("rho", 0.0)), float(probe.get("p_actor", 0.5)), gen)
        try:
            metrics = probe_metrics(estimator, z, y, mu, int(probe["B"]),
                                    derived_generator(seed, "probe-estimator", cell["name"], s))
        except NonFiniteError:  # non-finite values reached the estimator's input checks: diverged
            metrics = {"cos": math.nan, "perp_moment": math.nan, "signal_fraction": math.nan}
        diverged = not all(math.isfinite(v) for v in metrics.values())
        rows.append({"seed": s, "value": metrics["signal_fraction"], "diverged": diverged,
                     "cos": metrics["cos"], "perp_moment": metrics["perp_moment"]})
    return pd.DataFrame(rows)
