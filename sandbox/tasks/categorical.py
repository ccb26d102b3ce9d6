"""Contextual categorical tasks: a context in, one of K actions out — a contextual environment
(``sandbox.envs.contextual``: the bandits, contaminated MNIST) × a categorical policy
(``sandbox.policies.categorical``: tabular, MLP) × the objective of ``mode`` (sampled, or exact
enumeration of every action), composed by the generic ``Task``.

What the family adds is a diagnostics hook, ``OracleCosines``: the exact oracles of a batch — the
PG oracle Σ_a π(a|x)·R(x, a)·∇log π(a|x) (enumerating the K actions) and the CE oracle ∇log π(y|x)
— and the cosines of the update to them. A task of the family is a dataclass of knobs whose
``__post_init__`` calls ``compose`` (``sandbox.tasks.bandits``, ``sandbox.tasks.mnist``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.advantages import Advantage
from sandbox.core.rollout import Rollout
from sandbox.core.validation import check_choice
from sandbox.diagnostics import cosine
from sandbox.envs.bandits import ce_oracle, exact_pg
from sandbox.envs.contextual import ContextualEnv, ContextualEnvironment
from sandbox.estimators import make_estimator
from sandbox.estimators.base import Estimator
from sandbox.objectives import MODES, expected_update
from sandbox.policies.base import Policy
from sandbox.tasks.base import Task
from sandbox.tasks.compose import choose_objective, choose_policy, chosen


def flat_grad(outputs: Tensor, params: Sequence[Tensor], population: int, retain_graph: bool = False) -> Tensor:
    """Gradient of a scalar (a sum over members) w.r.t. population params, flattened to [S, D]."""
    grads = torch.autograd.grad(outputs, list(params), allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(population, -1)
                      for p, g in zip(params, grads)], -1)


def compose(task: Task, env: ContextualEnv, own: str, build_own: Callable[[], Policy], probes: Sequence[Estimator] = (),
            probe_advantage: Advantage | None = None, reference_estimators: Sequence[str] = ()) -> None:
    """Give ``task`` (whose knobs ``batch_size``, ``samples_per_context``, ``mode``, ``policy``,
    ``policy_kwargs`` and ``objective`` are set) its contextual environment, the policy its ``policy``
    key names (its ``own`` family from ``build_own``, else from ``env.spec``: ``sandbox.tasks.compose``),
    the objective of ``objective``/``mode`` and the oracle-cosine diagnostics; ``task.env`` is the
    contextual problem itself."""
    check_choice("mode", task.mode, tuple(MODES))
    objective = chosen("objective", task.objective, "plain", "mode", "exact" if task.mode == "exact" else "plain",
                       "plain")
    task.env = env
    task.policy = choose_policy(task, task.policy, env.spec, own, build_own)
    task.objective = choose_objective(task, objective, env.spec, task.policy)
    task.environment = ContextualEnvironment(env, task.batch_size, task.samples_per_context, task.objective.enumerates)
    task.diagnostics = OracleCosines(tuple(probes), probe_advantage, tuple(reference_estimators))


@dataclass(frozen=True)
class OracleCosines:
    """Diagnostics at logged steps: the cosines of the update to the PG and CE oracles; for each
    ``probes`` estimator, the same cosines of its batch gradient on the same batch (with
    ``probe_advantage``); for each of ``reference_estimators`` (names), those of its exact expected
    update in logit space."""

    probes: tuple = ()
    probe_advantage: Advantage | None = None
    reference_estimators: tuple = ()

    @staticmethod
    def oracle_contexts(task: Task, rollout: Rollout) -> Tensor:
        """The contexts the oracles average over (the environment's choice given the batch's distinct ones)."""
        rows = task.environment.observe(rollout.obs, rollout.extras).run
        return task.env.oracle_contexts(rollout.obs[:, ::rows])

    @staticmethod
    def oracle_directions(task: Task, params: Sequence[Tensor], contexts: Tensor) -> dict[str, Tensor]:
        """Ascent directions [S, D]: exact PG (Σ_a π·R·∇log π, averaged over contexts) and CE (∇log π(y))."""
        leaves = [p.detach().requires_grad_(True) for p in params]
        log_probs = torch.log_softmax(task.policy.context_logits(leaves, task.environment.observe(contexts, {})), -1)
        table = task.env.reward_table(contexts).to(log_probs.dtype)
        pg = (log_probs.detach().exp() * table * log_probs).sum(-1).mean(-1).sum()
        ce = log_probs.gather(-1, task.env.labels(contexts).unsqueeze(-1)).mean((-2, -1)).sum()
        return {"pg": flat_grad(pg, leaves, task.population, retain_graph=True),
                "ce": flat_grad(ce, leaves, task.population)}

    def __call__(self, task, params, rollout, grad, estimator, terms_of=None):
        contexts = self.oracle_contexts(task, rollout)
        oracles = self.oracle_directions(task, params, contexts)
        metrics = {f"cos_{name}": cosine(-grad, d) for name, d in oracles.items()}  # -grad: the ascent direction
        for probe in self.probes:
            leaves = [p.detach().requires_grad_(True) for p in params]
            terms = terms_of(leaves, rollout, self.probe_advantage)
            g = flat_grad(task.objective(probe, terms, rollout, leaves).loss, leaves, task.population)
            for name, d in oracles.items():
                metrics[f"probe_{probe.name}_cos_{name}"] = cosine(-g, d)
        if self.reference_estimators:  # in logit space, at the oracle contexts
            z = task.policy.context_logits([p.detach() for p in params], task.environment.observe(contexts, {}))
            labels, S = task.env.labels(contexts), z.shape[0]
            pg, ce = exact_pg(z, labels).reshape(S, -1), ce_oracle(z, labels).reshape(S, -1)
            for name in self.reference_estimators:
                ref = expected_update(make_estimator(name), z, labels).reshape(S, -1)
                metrics[f"ref_{name}_cos_pg"] = cosine(ref, pg)
                metrics[f"ref_{name}_cos_ce"] = cosine(ref, ce)
        return metrics


__all__ = ["OracleCosines", "compose", "flat_grad"]
