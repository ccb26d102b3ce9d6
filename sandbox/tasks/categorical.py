"""Contextual categorical tasks: a context in, one of K actions out — a contextual environment
(``sandbox.envs.contextual``: the bandits, contaminated MNIST) × a categorical policy
(``sandbox.policies.categorical``: tabular, MLP) × the objective of ``mode`` (sampled, or exact
enumeration of every action).

One class for the family: frictions at sampling time, the learner's scores, and the exact oracles
of a batch — the PG oracle Σ_a π(a|x)·R(x, a)·∇log π(a|x) (enumerating the K actions) and the CE
oracle ∇log π(y|x). A task of the family is a dataclass of knobs whose ``__post_init__`` builds its
``env``, ``policy`` and ``objective`` (``sandbox.tasks.bandits``, ``sandbox.tasks.mnist``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from sandbox.advantages import Advantage
from sandbox.core.rollout import Rollout
from sandbox.diagnostics import cosine
from sandbox.envs.bandits import ce_oracle, exact_pg
from sandbox.envs.contextual import ContextualEnv
from sandbox.estimators import make_estimator
from sandbox.estimators.base import Estimator
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.objectives import expected_update
from sandbox.policies.categorical import CategoricalPolicy
from sandbox.policies.decode import Versions, decode, fresh, teacher_forced
from sandbox.tasks.base import Batch, PolicySample, Scored, Task


def flat_grad(outputs: Tensor, params: Sequence[Tensor], population: int, retain_graph: bool = False) -> Tensor:
    """Gradient of a scalar (a sum over members) w.r.t. population params, flattened to [S, D]."""
    grads = torch.autograd.grad(outputs, list(params), allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(population, -1)
                      for p, g in zip(params, grads)], -1)


class CategoricalTask(Task):
    """``env`` × ``policy`` × ``objective``; rows are ``samples_per_context`` draws for each of
    ``batch_size`` contexts, grouped as the environment says (mode='exact': the K actions of each
    of the environment's enumerated contexts).

    Diagnostics at logged steps: the cosines of the update to the PG and CE oracles; for each probe
    estimator (``_probes``, MNIST's ``probes``), the same cosines of its batch gradient on the same
    batch; for each of ``reference_estimators`` (names), those of its exact expected update in logit space.
    """

    #: the reward is 1[a = y] for a label y (what ``label_flip`` flips; ``RunConfig`` checks)
    label_reward = True

    env: ContextualEnv
    policy: CategoricalPolicy
    batch_size: int
    samples_per_context: int
    population: int
    frictions: FrictionStack = FrictionStack()
    behavior: str = "reported"  # μ given to the learner: 'reported' | 'true' (what the actor sampled from)
    reference_estimators: tuple = ()
    _probes: Sequence[Estimator] = ()
    _probe_advantage: Advantage | None = None

    @property
    def n_actions(self) -> int:
        return self.env.n_actions

    def init_params(self, generator):
        self.env.reset(generator)  # the environment's state first, then the policy's parameters
        return self.policy.init(self.population, generator)

    def logits(self, params: Sequence[Tensor], contexts: Tensor) -> Tensor:
        """``[S, R, K]`` for context ids ``[S, R]``. A policy computed ``once_per_context`` runs once per
        run of identical contexts (a context's samples, or its enumerated actions; checked first)."""
        dtype = params[0].dtype
        r = self.n_actions if self.objective.enumerates else self.samples_per_context
        if self.policy.once_per_context and r > 1 and contexts.shape[-1] % r == 0:
            distinct = contexts[..., ::r]
            if torch.equal(distinct.repeat_interleave(r, -1), contexts):
                return self.policy.logits(params, self.env.features(distinct, dtype)).repeat_interleave(r, -2)
        return self.policy.logits(params, self.env.features(contexts, dtype))

    # ------------------------------------------------------------------ actor side
    def draw_batch(self, generator):
        if self.objective.enumerates:  # every action of each context is enumerated
            contexts = self.env.enumerated_contexts(self.batch_size, generator)
            return Batch(obs=contexts, rows=contexts, group=torch.arange(contexts.shape[-1]))
        n, m = self.batch_size, self.samples_per_context
        contexts = self.env.sample_contexts(n, generator).repeat_interleave(m, dim=-1)  # [S, n·m]
        return Batch(obs=contexts, rows=contexts, group=self.env.group_ids(contexts, m))

    def friction_context(self, batch: Batch, seed: int) -> FrictionContext:
        contexts = batch.obs
        return FrictionContext(
            n_actions=self.n_actions,
            reward_range=self.env.reward_range,
            correct_actions=self.env.labels(contexts).unsqueeze(-1),
            wrong_actions=self.env.wrong_labels(contexts).unsqueeze(-1),
            seed=seed,
        )

    def sample(self, params, batch, chain, generator, versions=None):
        # one position, whose distribution no token precedes: any action is scored by the drawn one
        one = Versions.single(params, 1)
        out = decode(lambda p, _: self.logits(p, batch.obs), one, chain, fresh(generator), batch.obs.shape, keep=True)
        return PolicySample(out.actions, out.logp, teacher_forced(lambda p, a: out.log_probs, one, out))

    def reward(self, batch, actions, generator):
        return self.env.sample_rewards(batch.obs, actions[..., 0], generator)

    def rollout_extras(self, batch, ctx, actor_params, params, sample):
        return {"labels": ctx.correct_actions[..., 0]}

    # ------------------------------------------------------------------ learner side
    def per_sample_grad_sq_norms(self, params: Sequence[Tensor], contexts: Tensor, actions: Tensor) -> Tensor:
        """‖∇_θ log π(a|x)‖² per row ``[S, n]`` (the policy's, for the min-variance baseline)."""
        return self.policy.grad_sq_norms(params, self.env.features(contexts, params[0].dtype), actions)

    def score(self, params, rollout, grad=True):
        contexts = rollout.obs
        if self.objective.enumerates and self.policy.scores_enumerated_contexts:
            return self._score_enumerated(params, rollout, grad)
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

    def _score_enumerated(self, params, rollout, grad):
        """Every (context, action) row from one log π(·|x) per context: rows n·K in context order."""
        K = self.n_actions
        contexts = rollout.obs[:, ::K]
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            log_probs = self.policy.log_probs(params, self.env.features(contexts, params[0].dtype))  # [S, n, K]
        S, n, _ = log_probs.shape
        labels = rollout.extras["labels"][:, ::K]
        return Scored(
            logp=log_probs.reshape(S, n * K, 1),
            target_logp=log_probs.gather(-1, labels.unsqueeze(-1)).repeat_interleave(K, dim=1),
            providers={"probs": lambda: log_probs.detach().exp().repeat_interleave(K, dim=1)},
        )

    def token_logits(self, params, rollout):
        with torch.no_grad():
            return self.logits([p.detach() for p in params], rollout.obs).unsqueeze(-2)  # [S, R, 1, K]

    def learner_rollout(self, rollout):
        if self.behavior == "true":
            return rollout.replace(behavior_logp=rollout.true_behavior_logp)
        return rollout

    # ------------------------------------------------------------------ evaluation and oracles
    def evaluate(self, params, generator):
        detached = [p.detach() for p in params]
        return self.env.evaluate(lambda features: self.policy.logits(detached, features), params[0].dtype)

    def oracle_contexts(self, rollout: Rollout) -> Tensor:
        """The contexts the oracles average over (the environment's choice given the batch's distinct ones)."""
        rows = self.n_actions if self.objective.enumerates else self.samples_per_context
        return self.env.oracle_contexts(rollout.obs[:, ::rows])

    def oracle_directions(self, params: Sequence[Tensor], contexts: Tensor) -> dict[str, Tensor]:
        """Ascent directions [S, D]: exact PG (Σ_a π·R·∇log π, averaged over contexts) and CE (∇log π(y))."""
        leaves = [p.detach().requires_grad_(True) for p in params]
        log_probs = torch.log_softmax(self.logits(leaves, contexts), -1)
        table = self.env.reward_table(contexts).to(log_probs.dtype)
        pg = (log_probs.detach().exp() * table * log_probs).sum(-1).mean(-1).sum()
        ce = log_probs.gather(-1, self.env.labels(contexts).unsqueeze(-1)).mean((-2, -1)).sum()
        return {"pg": flat_grad(pg, leaves, self.population, retain_graph=True),
                "ce": flat_grad(ce, leaves, self.population)}

    def update_diagnostics(self, params, rollout, grad, estimator, terms_of=None):
        contexts = self.oracle_contexts(rollout)
        oracles = self.oracle_directions(params, contexts)
        metrics = {f"cos_{name}": cosine(-grad, d) for name, d in oracles.items()}  # -grad: the ascent direction
        for probe in self._probes:
            leaves = [p.detach().requires_grad_(True) for p in params]
            terms = terms_of(leaves, rollout, self._probe_advantage)
            g = flat_grad(self.objective(probe, terms, rollout, leaves).loss, leaves, self.population)
            for name, d in oracles.items():
                metrics[f"probe_{probe.name}_cos_{name}"] = cosine(-g, d)
        if self.reference_estimators:  # in logit space, at the oracle contexts
            z = self.logits([p.detach() for p in params], contexts)
            labels, S = self.env.labels(contexts), z.shape[0]
            pg, ce = exact_pg(z, labels).reshape(S, -1), ce_oracle(z, labels).reshape(S, -1)
            for name in self.reference_estimators:
                ref = expected_update(make_estimator(name), z, labels).reshape(S, -1)
                metrics[f"ref_{name}_cos_pg"] = cosine(ref, pg)
                metrics[f"ref_{name}_cos_ce"] = cosine(ref, ce)
        return metrics
