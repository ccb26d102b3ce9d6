"""The exact-expectation objective: every (context, action) row weighted by μ(a|x)/n, so the
gradient of Σ weight·token_loss is the exact expected update E_{a∼μ}[g(a)] of a per-token estimator
(bandits and MNIST, ``mode='exact'``; shared/spec/environments.md, "Bandits")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sandbox.core.observations import ContextIdSpec, ContextVectorSpec
from sandbox.core.rollout import Rollout
from sandbox.core.terms import EstimatorOutput, PGTerms
from sandbox.estimators.base import Estimator
from sandbox.objectives.base import OBJECTIVES, PLAIN, Objective


def enumerated_terms(logits: Tensor, actor_probs: Tensor, rewards: Tensor, baseline: Tensor | float,
                     generator: torch.Generator | None = None, labels: Tensor | None = None
                     ) -> tuple[PGTerms, Tensor]:
    """PGTerms over every (context, action) pair — rows N·K, T = 1 — and the weights μ(a|n)/N.

    ``logits`` [S, N, K] (differentiable), ``actor_probs`` μ [S, N, K], ``rewards`` R(n, a)
    [S, N, K], ``baseline`` b(n) [S, N] or a float.
    """
    S, N, K = logits.shape
    log_probs = torch.log_softmax(logits, -1)
    b = baseline if isinstance(baseline, Tensor) else torch.full((S, N), float(baseline), dtype=logits.dtype)
    adv = (rewards - b.unsqueeze(-1)).reshape(S, N * K)
    terms = PGTerms(
        logp=log_probs.reshape(S, N * K, 1),
        advantages=adv.to(logits.dtype),
        behavior_logp=torch.log(actor_probs).reshape(S, N * K, 1).to(logits.dtype),
        group=torch.arange(N).repeat_interleave(K),
        target_logp=None if labels is None else log_probs.gather(-1, labels.unsqueeze(-1)).repeat_interleave(K, dim=1),
        generator=generator,
    )
    return terms, (actor_probs / N).reshape(S, N * K, 1).to(logits.dtype)


def expected_objective(estimator: Estimator, terms: PGTerms, weights: Tensor) -> EstimatorOutput:
    """Σ_rows weight·token_loss: its gradient is the exact expected update E_μ[g]."""
    if estimator.batch_dependent:
        raise ValueError(f"estimator {estimator.name!r} depends on the whole batch: its exact expected "
                         "update cannot be enumerated action by action; use mode='sampled'")
    values = estimator.penalized_token_loss(terms).values
    return EstimatorOutput(loss=(weights * values).sum(), metrics={})


@OBJECTIVES.register("exact")
@dataclass(frozen=True)
class ExactExpectation(Objective):
    """``mode='exact'``: the actor enumerates every action of every context (``enumerates``) and
    the loss is Σ_rows μ(a|x)/n · token_loss (``rollout.extras['weights']``), whose gradient is the
    exact expected update. It needs a per-context baseline and an estimator that is not batch-dependent."""

    enumerates = True
    reads = (ContextIdSpec, ContextVectorSpec)  # K actions of a context: enumerable

    def check_advantage(self, advantage):
        if not advantage.per_context:
            raise ValueError(f"mode='exact' needs a per-context baseline ('constant' or 'confidence': it "
                             f"enumerates actions one by one), got advantage {advantage.name!r}")

    def __call__(self, estimator, terms, rollout, params=None):
        return expected_objective(estimator, terms, rollout.extras["weights"])

    def collect(self, task: Any, actor_params: Sequence[Tensor], version: int, generator: torch.Generator,
                seed: int) -> Rollout:
        """The actor's rollout under this objective (``sandbox.runtime.actor.collect`` hands it over):
        every (context, action) row of the task's batch, μ from the actor's sampling chain over the
        policy's logits, ``extras['weights'] = μ(a|x)/n``; the rows (rewards, labels) are the
        contextual environment's (``enumerated_rollout``). Only frictions that change μ apply."""
        frictions = task.frictions
        if any(f.kind == "reward" or f.replaces_rows for f in frictions.frictions):
            raise ValueError("the exact (enumerating) mode takes only frictions that change μ (logit noise, "
                             "quantisation, ε-random): row overrides and reward corruption need mode='sampled'")
        batch = task.draw_batch(generator)
        ctx = task.friction_context(batch, seed)
        with torch.no_grad():
            params = frictions.actor_params(list(actor_params), ctx) if frictions else list(actor_params)
            chain = frictions.sampling_chain(ctx, generator, task.temperature, task.eps_mix)
            obs = task.environment.observe(batch.obs, batch.extras)
            logits = task.policy.token_logits(params, obs, None)[..., 0, :]  # [S, n, K]: one position
            mu = chain.distribution(logits)[1]
            reported = None if chain.reports_sampled else chain.reporting().distribution(logits)[0]
        S, n, K = mu.shape
        # actions whose probability underflows to 0 carry weight 0: keep their log-prob finite
        tiny = torch.finfo(mu.dtype).tiny
        log_mu = torch.log(mu.clamp(min=tiny)).reshape(S, n * K, 1)
        reported = log_mu if reported is None else reported.clamp(min=math.log(tiny)).reshape(S, n * K, 1)
        rollout = task.environment.enumerated_rollout(batch, log_mu, reported, version)
        rollout.extras["weights"] = (mu / n).reshape(S, n * K, 1)
        return rollout


EXACT = ExactExpectation()
#: the objective of each value of the tasks' ``mode`` knob
MODES = {"sampled": PLAIN, "exact": EXACT}


def expected_update(estimator: Estimator, logits: Tensor, labels: Tensor, actor_probs: Tensor | None = None,
                    baseline: Tensor | float = 0.0) -> Tensor:
    """The exact expected ascent direction of ``estimator`` in logit space, ``[S, N, K]``:
    −∇_z Σ_n Σ_a μ(a|n)/N · loss(a) (μ = π by default)."""
    z = logits.detach().requires_grad_(True)
    mu = torch.softmax(z.detach(), -1) if actor_probs is None else actor_probs
    rewards = torch.nn.functional.one_hot(labels, z.shape[-1]).to(z.dtype)
    terms, weights = enumerated_terms(z, mu, rewards, baseline, labels=labels)
    (grad,) = torch.autograd.grad(expected_objective(estimator, terms, weights).loss, z)
    return -grad


__all__ = ["EXACT", "MODES", "ExactExpectation", "enumerated_terms", "expected_objective", "expected_update"]
