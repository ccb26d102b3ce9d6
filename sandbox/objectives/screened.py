"""Screened Kondo (the ``backward='screened'`` objective of the sequence tasks): the same
loss and gradient as the unscreened estimator, with the differentiable forward and backward run only
on the rows that hold a kept token — the saving Kondo screening promises, made real."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sandbox.core.observations import Prompts, TokenPromptSpec
from sandbox.core.rollout import Rollout
from sandbox.core.terms import EstimatorOutput, PGTerms, TokenLoss
from sandbox.estimators.base import Estimator, aggregate
from sandbox.objectives.base import OBJECTIVES, Objective

#: the policy's log-probs of answers ``[S, n, A]`` to prompts ``[S, g, P]`` (row i answers prompt groups[:, i])
Rescore = Callable[..., Tensor]


@OBJECTIVES.register("screened")
@dataclass(frozen=True)
class ScreenedBackward(Objective):
    """``objective='screened'`` (``backward='screened'``): the learner scores the rollout without
    gradients (``rescores``); the loss re-runs only the rows Kondo keeps through ``policy.score`` on
    ``Prompts`` whose ``groups`` name each kept row's prompt (a policy that ``scores_regrouped``).
    Needs an estimator that screens rows and no KL penalty."""

    policy: Any
    rescores = True
    reads = (TokenPromptSpec,)

    @classmethod
    def compose(cls, policy):
        if not policy.scores_regrouped:
            raise ValueError(f"objective 'screened' re-runs the kept rows through a scorer of regrouped prompts; "
                             f"policy {type(policy).__name__} has none: use objective 'plain' (backward='full')")
        return cls(policy)

    def answer_logp(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor, groups: Tensor) -> Tensor:
        """The policy's log-probs of ``answers [S, n, A]``, row i answering ``prompts[:, groups[:, i]]``."""
        return self.policy.score(params, Prompts(prompts, 1, answers.shape[-1], groups=groups), answers)

    def __call__(self, estimator, terms, rollout, params=None):
        if not estimator.screens_rows:
            raise ValueError(f"backward='screened' needs an estimator that screens rows (kondo), got {estimator.name!r}")
        if params is None:
            raise ValueError("backward='screened' needs params: it recomputes the kept rows with gradients")
        return screened_objective(self.answer_logp, estimator, terms, rollout, params)


def screened_objective(answer_logp: Rescore, estimator: Estimator, terms: PGTerms, rollout: Rollout,
                       params: Sequence[Tensor]) -> EstimatorOutput:
    """Kondo with a real saving: the keep mask comes from the no-grad scores in ``terms``; only the
    rows that hold a kept token with a nonzero advantage run the differentiable forward (and so
    the backward) — the others contribute exactly zero.

    Population members keep different numbers of rows; each runs ``max_s n_s`` rows (its kept rows
    first, padded with unkept rows whose loss weight is 0). The loss is Kondo's: −Σ_kept A·log π_θ
    aggregated over the valid tokens — the same value and gradient as the unscreened estimator."""
    if estimator.kl_coef:
        raise ValueError("backward='screened' with kl_coef > 0: the penalty puts every token in the backward "
                         "pass; use backward='full'")
    keep = estimator.keep_mask(terms)  # [S, B, T] (one draw for priority='uniform', as unscreened)
    # a kept token with A = 0 contributes exactly 0 to the loss and its gradient: no backward for it
    rows = (keep & (terms.token_advantages != 0)).any(-1)  # [S, B]
    S, B, T = keep.shape
    n = max(int(rows.sum(-1).max()), 1)
    order = torch.sort((~rows).to(torch.int8), dim=-1, stable=True).indices[:, :n]  # kept rows first
    row_groups = rollout.group if rollout.group.ndim == 2 else rollout.group.expand(S, B)
    prompts = rollout.obs  # [S, G, P]; only the prompts of kept rows run, each once
    G = prompts.shape[1]
    used = torch.zeros(S, G, dtype=torch.long).scatter_add(1, row_groups, rows.long()) > 0
    n_g = max(int(used.sum(-1).max()), 1)
    g_order = torch.sort((~used).to(torch.int8), dim=-1, stable=True).indices[:, :n_g]
    position = torch.zeros(S, G, dtype=torch.long).scatter(1, g_order, torch.arange(n_g).expand(S, n_g))
    sub_prompts = prompts.gather(1, g_order.unsqueeze(-1).expand(S, n_g, prompts.shape[-1]))
    groups = position.gather(1, row_groups.gather(1, order))
    sub_actions = rollout.actions.gather(1, order.unsqueeze(-1).expand(S, n, T))
    sub_logp = answer_logp(params, sub_prompts, sub_actions, groups=groups)
    logp = terms.logp.detach().scatter(1, order.unsqueeze(-1).expand(S, n, T), sub_logp)
    out = estimator.token_loss(dataclasses.replace(terms, logp=logp), keep=keep)
    out.metrics["backward_rows_frac"] = torch.full((S,), n / B, dtype=logp.dtype)
    loss = aggregate(out.values, terms.valid, estimator.aggregation).sum()
    return EstimatorOutput(loss=loss, metrics=estimator.diagnostics(terms, TokenLoss(out.values.detach(), metrics=out.metrics)))


__all__ = ["ScreenedBackward", "screened_objective"]
