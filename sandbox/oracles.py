"""Oracle diagnostics of the contextual family (the bandits, MNIST): at logged steps, the cosines
of the update to a batch's exact oracles — the PG oracle Σ_a π(a|x)·R(x, a)·∇log π(a|x) (enumerating
the K actions) and the CE oracle ∇log π(y|x) — and those of probe estimators' batch gradients and of
reference estimators' exact expected updates. A task's hook (``Task.diagnostics``), given estimator
and baseline *names*: the estimators are made here, so no task imports an estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sandbox.advantages import make_advantage
from sandbox.core.rollout import Rollout
from sandbox.diagnostics import cosine
from sandbox.envs.bandits import ce_oracle, exact_pg
from sandbox.estimators import make_estimator
from sandbox.objectives import expected_update


def flat_grad(outputs: Tensor, params: Sequence[Tensor], population: int, retain_graph: bool = False) -> Tensor:
    """Gradient of a scalar (a sum over members) w.r.t. population params, flattened to [S, D]."""
    grads = torch.autograd.grad(outputs, list(params), allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(population, -1)
                      for p, g in zip(params, grads)], -1)


@dataclass(frozen=True)
class OracleCosines:
    """Diagnostics at logged steps: the cosines of the update to the PG and CE oracles; for each
    ``probes`` estimator, the same cosines of its batch gradient on the same batch (with
    ``probe_advantage``); for each of ``reference_estimators`` (names), those of its exact expected
    update in logit space."""

    probes: tuple = ()
    probe_advantage: str | None = None
    reference_estimators: tuple = ()

    def __post_init__(self) -> None:
        """The probes' estimators and baseline, made once (a bad name fails when the task is made)."""
        object.__setattr__(self, "probe_estimators", tuple(make_estimator(name) for name in self.probes))
        object.__setattr__(self, "probe_baseline",
                           None if self.probe_advantage is None else make_advantage(self.probe_advantage))

    @staticmethod
    def oracle_contexts(task: Any, rollout: Rollout) -> Tensor:
        """The contexts the oracles average over (the environment's choice given the batch's distinct ones)."""
        rows = task.environment.observe(rollout.obs, rollout.extras).run
        return task.environment.env.oracle_contexts(rollout.obs[:, ::rows])

    @staticmethod
    def oracle_directions(task: Any, params: Sequence[Tensor], contexts: Tensor) -> dict[str, Tensor]:
        """Ascent directions [S, D]: exact PG (Σ_a π·R·∇log π, averaged over contexts) and CE (∇log π(y))."""
        env = task.environment.env
        leaves = [p.detach().requires_grad_(True) for p in params]
        log_probs = torch.log_softmax(task.policy.context_logits(leaves, task.environment.observe(contexts, {})), -1)
        table = env.reward_table(contexts).to(log_probs.dtype)
        pg = (log_probs.detach().exp() * table * log_probs).sum(-1).mean(-1).sum()
        ce = log_probs.gather(-1, env.labels(contexts).unsqueeze(-1)).mean((-2, -1)).sum()
        return {"pg": flat_grad(pg, leaves, task.population, retain_graph=True),
                "ce": flat_grad(ce, leaves, task.population)}

    def __call__(self, task, params, rollout, grad, terms_of=None):
        contexts = self.oracle_contexts(task, rollout)
        oracles = self.oracle_directions(task, params, contexts)
        metrics = {f"cos_{name}": cosine(-grad, d) for name, d in oracles.items()}  # -grad: the ascent direction
        for probe in self.probe_estimators:
            leaves = [p.detach().requires_grad_(True) for p in params]
            terms = terms_of(leaves, rollout, self.probe_baseline)
            g = flat_grad(task.objective(probe, terms, rollout, leaves).loss, leaves, task.population)
            for name, d in oracles.items():
                metrics[f"probe_{probe.name}_cos_{name}"] = cosine(-g, d)
        if self.reference_estimators:  # in logit space, at the oracle contexts
            z = task.policy.context_logits([p.detach() for p in params], task.environment.observe(contexts, {}))
            labels, S = task.environment.env.labels(contexts), z.shape[0]
            pg, ce = exact_pg(z, labels).reshape(S, -1), ce_oracle(z, labels).reshape(S, -1)
            for name in self.reference_estimators:
                ref = expected_update(make_estimator(name), z, labels).reshape(S, -1)
                metrics[f"ref_{name}_cos_pg"] = cosine(ref, pg)
                metrics[f"ref_{name}_cos_ce"] = cosine(ref, ce)
        return metrics


__all__ = ["OracleCosines", "flat_grad"]
