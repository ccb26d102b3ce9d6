"""Bandits with exact quantities, vectorised over seeds (shared/spec/environments.md, "Bandits").

Single-context K-armed (N = 1) and multi-context (N contexts × K arms) bandits with one correct
arm per context, R = 1[a = y_n], tabular softmax policy z ∈ R^{S×N×K}; and the Gaussian
"gambling" bandit (arm 0 pays 1, arm 1 pays N(μ, σ²)), a negative control for surprisal gating.

Exact quantities, in logit space, no sampling: J(z) = mean_n p_n with p_n = π_n(y_n);
∇J ∝ ⊕_n p_n·(e_{y_n} − π_n); the CE oracle ⊕_n (e_{y_n} − π_n); and the exact expected update of
any per-token estimator, E_{a∼μ}[g(a)] = Σ_a μ(a)·g(a), by enumerating actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.advantages import Advantage, compute_advantages
from sandbox.envs.categorical import CategoricalTask
from sandbox.estimators.base import Estimator, EstimatorOutput, PGTerms
from sandbox.frictions.base import FrictionStack
from sandbox.policies.tabular import init_table, tabular_logits
from sandbox.rollout import Rollout
from sandbox.runtime.task import register_task
from sandbox.validation import check_choice, check_int, check_range

# ----------------------------------------------------------------------------- closed forms


def log_softmax(logits: Tensor) -> Tensor:
    """log π over the last axis; z − max − log Σ exp(z − max), several times faster than
    ``torch.log_softmax`` on CPU for the short last axes of bandits (same values to rounding)."""
    shifted = logits - logits.detach().amax(-1, keepdim=True)
    return shifted - shifted.exp().sum(-1, keepdim=True).log()


def expected_return(logits: Tensor, labels: Tensor) -> Tensor:
    """J = mean_n π_n(y_n), ``logits [S, N, K]``, ``labels [S, N]`` → ``[S]``."""
    return torch.softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1).mean(-1)


def exact_pg(logits: Tensor, labels: Tensor) -> Tensor:
    """∇_z J·N = ⊕_n p_n (e_{y_n} − π_n), ``[S, N, K]`` (the 1/N factor dropped)."""
    probs = torch.softmax(logits, -1)
    onehot = torch.nn.functional.one_hot(labels, logits.shape[-1]).to(probs.dtype)
    p = probs.gather(-1, labels.unsqueeze(-1))
    return p * (onehot - probs)


def ce_oracle(logits: Tensor, labels: Tensor) -> Tensor:
    """⊕_n (e_{y_n} − π_n), ``[S, N, K]``."""
    probs = torch.softmax(logits, -1)
    return torch.nn.functional.one_hot(labels, logits.shape[-1]).to(probs.dtype) - probs


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


BATCH_DEPENDENT = ("kondo", "pmpo", "m2po")


def expected_objective(estimator: Estimator, terms: PGTerms, weights: Tensor) -> EstimatorOutput:
    """Σ_rows weight·token_loss: its gradient is the exact expected update E_μ[g]."""
    if estimator.name in BATCH_DEPENDENT or getattr(estimator, "whiten", False):
        raise ValueError(f"estimator {estimator.name!r} depends on the whole batch: its exact expected "
                         "update cannot be enumerated action by action; use mode='sampled'")
    values = estimator.token_loss(terms)
    values = values if isinstance(values, Tensor) else values.values
    return EstimatorOutput(loss=(weights * values).sum(), metrics={})


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


# ----------------------------------------------------------------------------- tasks


@register_task("bandit")
@dataclass
class Bandit(CategoricalTask):
    """N contexts × K arms, one correct arm per context (drawn per seed), tabular softmax policy.

    mode='sampled': each step draws ``batch_size`` contexts uniformly and ``samples_per_context``
    actions each. mode='exact': the update is the exact expected update of the estimator (every
    context, every action, weighted by μ); baselines must then be ``constant`` or ``confidence``.
    """

    N: int = 1  # contexts
    K: int = 10  # arms
    batch_size: int = 100  # contexts drawn per step (rows = batch_size · samples_per_context)
    samples_per_context: int = 1
    population: int = 1  # seeds S, one tensor
    init_std: float = 0.0  # logits 0 (std 0) or N(0, std²)
    mode: str = "sampled"  # 'sampled' | 'exact'
    dtype: str = "float32"  # 'float32' | 'float64'
    reference_estimators: tuple = ()  # names whose exact expected update is compared with the oracles at log steps
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        check_int("N", self.N, low=1)
        check_int("K", self.K, low=2)
        check_int("batch_size", self.batch_size, low=1)
        check_int("samples_per_context", self.samples_per_context, low=1)
        check_int("population", self.population, low=1)
        check_range("init_std", self.init_std, low=0.0)
        check_choice("mode", self.mode, ("sampled", "exact"))
        check_choice("dtype", self.dtype, ("float32", "float64"))
        self.n_actions = self.K
        self._labels: Tensor | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    # ------------------------------------------------------------------ environment
    def init_params(self, generator):
        self._labels = torch.randint(0, self.K, (self.population, self.N), generator=generator)
        table = init_table(self.population, self.N, self.K, self.init_std, generator, self.torch_dtype)
        return [table]

    @property
    def label_table(self) -> Tensor:
        if self._labels is None:
            raise ValueError("call init_params first: the correct arms are drawn with the parameters")
        return self._labels

    def sample_contexts(self, n, generator):
        if self.N == 1:
            return torch.zeros(self.population, n, dtype=torch.long)
        return torch.randint(0, self.N, (self.population, n), generator=generator)

    def logits(self, params, contexts):
        return tabular_logits(params[0], contexts)

    def labels(self, contexts):
        return self.label_table.gather(1, contexts)

    def reward_table(self, contexts):
        return torch.nn.functional.one_hot(self.labels(contexts), self.K).to(self.torch_dtype)

    def group_ids(self, contexts):
        """Rows that share a context id form a group (all rows, when N = 1)."""
        return contexts

    def per_sample_grad_sq_norms(self, params, contexts, actions):
        # ∇_z log π(a|n) = e_a − π_n: ‖·‖² = 1 − 2π(a) + Σ π²
        probs = torch.softmax(self.logits(params, contexts), -1).detach()
        return 1 - 2 * probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1) + probs.pow(2).sum(-1)

    def all_contexts(self) -> Tensor:
        return torch.arange(self.N).expand(self.population, self.N)

    # ------------------------------------------------------------------ exact mode
    def collect(self, actor_params, step, version, generator, seed):
        if self.mode == "sampled":
            return super().collect(actor_params, step, version, generator, seed)
        contexts = self.all_contexts()
        ctx = self.friction_context(contexts, seed)
        with torch.no_grad():
            if self.frictions:
                mu = self.actor_probs(actor_params, contexts, ctx, generator)  # [S, N, K]
            else:
                mu = log_softmax(actor_params[0]).exp()
        S, N, K = mu.shape
        actions = torch.arange(K).repeat(N).expand(S, N * K)
        return Rollout(
            obs=contexts.repeat_interleave(K, dim=-1),
            actions=actions.unsqueeze(-1),
            mask=torch.ones(S, N * K, 1, dtype=torch.bool),
            behavior_logp=torch.log(mu).reshape(S, N * K, 1),
            true_behavior_logp=torch.log(mu).reshape(S, N * K, 1),
            rewards=self.reward_table(contexts).reshape(S, N * K),
            group=torch.arange(N).repeat_interleave(K),
            version=torch.full((S, N * K, 1), version, dtype=torch.long),
            extras={"labels": self.labels(contexts).repeat_interleave(K, dim=-1), "weights": (mu / N).reshape(S, N * K, 1)},
        )

    def learner_terms(self, params, rollout, advantage: Advantage, generator, recompute_proximal):
        if self.mode == "sampled":
            return super().learner_terms(params, rollout, advantage, generator, recompute_proximal)
        if advantage.name not in ("constant", "confidence"):
            raise ValueError(f"mode='exact' needs a per-context baseline ('constant' or 'confidence'), "
                             f"got advantage {advantage.name!r}")
        # every (context, action) row: log π(a|n) for all contexts at once, no per-row logits
        log_probs = log_softmax(params[0])  # [S, N, K]
        S, N, K = log_probs.shape
        logp = log_probs.reshape(S, N * K, 1)
        adv = compute_advantages(advantage, rollout.rewards, rollout.group, "bandit (exact)",
                                 probs=lambda: log_probs.detach().exp().repeat_interleave(K, dim=1))
        target = log_probs.gather(-1, self.label_table.unsqueeze(-1)).repeat_interleave(K, dim=1)
        return PGTerms(
            logp=logp,
            advantages=adv,
            behavior_logp=rollout.behavior_logp,
            proximal_logp=logp.detach() if recompute_proximal else None,
            group=rollout.group,
            target_logp=target,
            generator=generator,
        )

    def objective(self, estimator, terms, rollout: Rollout, params=None):
        if self.mode == "exact":
            return expected_objective(estimator, terms, rollout.extras["weights"])
        return estimator(terms)

    # ------------------------------------------------------------------ evaluation and oracles
    def evaluate(self, params, generator):
        return {"error": 1 - expected_return(params[0].detach(), self.label_table)}

    def oracle_contexts(self, rollout):
        return self.all_contexts()

    def update_diagnostics(self, params, rollout, grad, estimator):
        """Cosines of the update to ∇J and to the CE oracle (over all contexts); for each
        reference estimator, the cosines of *its* exact expected update at the same parameters."""
        metrics = super().update_diagnostics(params, rollout, grad, estimator)
        if self.reference_estimators:
            from sandbox.diagnostics import cosine
            from sandbox.estimators import make_estimator

            z = params[0].detach()
            S = z.shape[0]
            pg, ce = exact_pg(z, self.label_table).reshape(S, -1), ce_oracle(z, self.label_table).reshape(S, -1)
            for name in self.reference_estimators:
                ref = expected_update(make_estimator(name), z, self.label_table).reshape(S, -1)
                metrics[f"ref_{name}_cos_pg"] = cosine(ref, pg)
                metrics[f"ref_{name}_cos_ce"] = cosine(ref, ce)
        return metrics


@register_task("gaussian_bandit")
@dataclass
class GaussianBandit(Bandit):
    """Two arms: arm 0 pays 1, arm 1 pays N(mu, sigma²) — the gambling arm. The better arm in
    expectation is the correct one; a negative control where gating on surprisal can hurt."""

    K: int = 2
    mu: float = 0.9  # mean payoff of the gambling arm
    sigma: float = 1.0  # its standard deviation, ≥ 0

    def __post_init__(self) -> None:
        check_range("mu", self.mu)
        check_range("sigma", self.sigma, low=0.0)
        if self.K != 2:
            raise ValueError(f"gaussian_bandit has exactly K=2 arms, got K={self.K}")
        super().__post_init__()
        self.reward_range = (min(0.0, self.mu - 3 * self.sigma), max(1.0, self.mu + 3 * self.sigma))

    def init_params(self, generator):
        params = super().init_params(generator)
        self._labels = torch.full((self.population, self.N), 0 if self.mu < 1 else 1, dtype=torch.long)
        return params

    def reward_table(self, contexts):
        table = torch.tensor([1.0, self.mu], dtype=self.torch_dtype)
        return table.expand(*contexts.shape, 2)

    def sample_rewards(self, contexts, actions, generator):
        noise = torch.randn(actions.shape, generator=generator, dtype=self.torch_dtype)
        return torch.where(actions == 0, torch.ones_like(noise), self.mu + self.sigma * noise)

    def evaluate(self, params, generator):
        probs = torch.softmax(params[0].detach(), -1)
        values = self.reward_table(self.all_contexts()).to(probs.dtype)
        regret = (values.max(-1).values - (probs * values).sum(-1)).mean(-1)
        return {"error": 1 - expected_return(params[0].detach(), self.label_table), "regret": regret}


__all__ = ["Bandit", "GaussianBandit", "ce_oracle", "enumerated_terms", "expected_objective",
           "expected_return", "expected_update", "exact_pg"]
