"""Contextual categorical bandits: a context in, one of K actions out, reward 1[a = y(x)] by default.

Shared by the bandits and contaminated MNIST: frictions at sampling time, the learner's terms,
and the exact oracles of a batch — the PG oracle Σ_a π(a|x)·R(x, a)·∇log π(a|x) (enumerating the
K actions) and the CE oracle ∇log π(y|x).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from sandbox.core.rollout import Rollout
from sandbox.diagnostics import cosine
from sandbox.estimators.base import Estimator
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.policies.decode import Versions, decode, fresh, teacher_forced
from sandbox.tasks.base import Batch, PolicySample, Scored, Task


def flat_grad(outputs: Tensor, params: Sequence[Tensor], population: int, retain_graph: bool = False) -> Tensor:
    """Gradient of a scalar (a sum over members) w.r.t. population params, flattened to [S, D]."""
    grads = torch.autograd.grad(outputs, list(params), allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(population, -1)
                      for p, g in zip(params, grads)], -1)


class CategoricalTask(Task):
    """Subclasses define contexts, logits and labels; rows are ``samples_per_context`` draws for
    each of ``batch_size`` contexts, grouped by context."""

    n_actions: int
    batch_size: int
    samples_per_context: int
    population: int
    frictions: FrictionStack = FrictionStack()

    # ------------------------------------------------------------------ to implement
    @abstractmethod
    def sample_contexts(self, n: int, generator: torch.Generator) -> Tensor:
        """Context ids ``[S, n]``."""

    @abstractmethod
    def logits(self, params: Sequence[Tensor], contexts: Tensor) -> Tensor:
        """``[S, n, K]`` logits for context ids ``[S, n]``."""

    @abstractmethod
    def labels(self, contexts: Tensor) -> Tensor:
        """Correct action per context ``[S, n]``."""

    def reward_table(self, contexts: Tensor) -> Tensor:
        """Expected reward of every action ``[S, n, K]`` (default 1[a = y])."""
        return torch.nn.functional.one_hot(self.labels(contexts), self.n_actions).to(torch.get_default_dtype())

    def sample_rewards(self, contexts: Tensor, actions: Tensor, generator: torch.Generator) -> Tensor:
        """Rewards of the sampled actions ``[S, n]`` (default: deterministic table lookup)."""
        return self.reward_table(contexts).gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def wrong_labels(self, contexts: Tensor) -> Tensor:
        """The fixed wrong answer used by the landmine bug: (y + 1) mod K."""
        return (self.labels(contexts) + 1) % self.n_actions

    reward_range: tuple[float, float] = (0.0, 1.0)

    def group_ids(self, contexts: Tensor) -> Tensor:
        """Group of each row for group baselines: by default the draw (the samples of one context
        draw form a group), ``[B]``; tasks with a small set of contexts group by context id."""
        return torch.arange(self.batch_size).repeat_interleave(self.samples_per_context)

    # ------------------------------------------------------------------ actor side
    def draw_batch(self, generator):
        n, m = self.batch_size, self.samples_per_context
        contexts = self.sample_contexts(n, generator).repeat_interleave(m, dim=-1)  # [S, n·m]
        return Batch(obs=contexts, rows=contexts, group=self.group_ids(contexts))

    def friction_context(self, batch: Batch, seed: int) -> FrictionContext:
        contexts = batch.obs
        return FrictionContext(
            n_actions=self.n_actions,
            reward_range=self.reward_range,
            correct_actions=self.labels(contexts).unsqueeze(-1),
            wrong_actions=self.wrong_labels(contexts).unsqueeze(-1),
            seed=seed,
        )

    def sample(self, params, batch, chain, generator, versions=None):
        # one position, whose distribution no token precedes: any action is scored by the drawn one
        one = Versions.single(params, 1)
        out = decode(lambda p, _: self.logits(p, batch.obs), one, chain, fresh(generator), batch.obs.shape, keep=True)
        return PolicySample(out.actions, out.logp, teacher_forced(lambda p, a: out.log_probs, one, out))

    def reward(self, batch, actions, generator):
        return self.sample_rewards(batch.obs, actions[..., 0], generator)

    def rollout_extras(self, batch, ctx, actor_params, params, sample):
        return {"labels": ctx.correct_actions[..., 0]}

    # ------------------------------------------------------------------ learner side
    def per_sample_grad_sq_norms(self, params: Sequence[Tensor], contexts: Tensor, actions: Tensor) -> Tensor:
        """‖∇_θ log π(a|x)‖² per row ``[S, n]``; subclasses provide it for the min-variance baseline."""
        raise ValueError(f"{type(self).__name__} does not provide per-sample gradient norms; "
                         "use min_variance with weights='rho2'")

    def score(self, params, rollout, grad=True):
        contexts = rollout.obs
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            log_probs = torch.log_softmax(self.logits(params, contexts), -1)  # [S, R, K]
        labels = rollout.extras["labels"]
        return Scored(
            logp=log_probs.gather(-1, rollout.actions),  # [S, R, 1]
            target_logp=log_probs.gather(-1, labels.unsqueeze(-1)),
            providers={
                "probs": lambda: log_probs.detach().exp(),
                "grad_sq_norms": lambda: self.per_sample_grad_sq_norms(params, contexts, rollout.actions[..., 0]),
            },
        )

    # ------------------------------------------------------------------ oracles
    def oracle_contexts(self, rollout: Rollout) -> Tensor:
        """The contexts the oracles average over (default: the batch's distinct contexts)."""
        return rollout.obs[:, :: self.samples_per_context]

    def oracle_directions(self, params: Sequence[Tensor], contexts: Tensor) -> dict[str, Tensor]:
        """Ascent directions [S, D]: exact PG (Σ_a π·R·∇log π, averaged over contexts) and CE (∇log π(y))."""
        leaves = [p.detach().requires_grad_(True) for p in params]
        log_probs = torch.log_softmax(self.logits(leaves, contexts), -1)
        table = self.reward_table(contexts).to(log_probs.dtype)
        pg = (log_probs.detach().exp() * table * log_probs).sum(-1).mean(-1).sum()
        ce = log_probs.gather(-1, self.labels(contexts).unsqueeze(-1)).mean((-2, -1)).sum()
        return {"pg": flat_grad(pg, leaves, self.population, retain_graph=True),
                "ce": flat_grad(ce, leaves, self.population)}

    def update_diagnostics(self, params, rollout, grad, estimator: Estimator, terms_of=None):
        direction = -grad  # the estimator's ascent direction
        oracles = self.oracle_directions(params, self.oracle_contexts(rollout))
        return {f"cos_{name}": cosine(direction, d) for name, d in oracles.items()}
