"""Bandit tasks: the bandits of ``sandbox.envs.bandits`` with a tabular softmax policy, sampled or
with the exact expected update (``mode='exact'``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.diagnostics import cosine
from sandbox.envs.bandits import ce_oracle, exact_pg, expected_return, log_softmax
from sandbox.estimators import make_estimator
from sandbox.frictions.base import FrictionStack
from sandbox.objectives import MODES, expected_update
from sandbox.policies.tabular import init_table, tabular_logits
from sandbox.tasks.base import Batch, Scored, register_task
from sandbox.tasks.categorical import CategoricalTask


@register_task("bandit")
@dataclass
class Bandit(CategoricalTask):
    """N contexts × K arms, one correct arm per context (drawn per seed), tabular softmax policy.

    mode='sampled': each step draws ``batch_size`` contexts uniformly and ``samples_per_context``
    actions each. mode='exact': the update is the exact expected update of the estimator (every
    context, every action, weighted by μ); baselines must then be ``constant`` or ``confidence``.
    """

    default_lr = 0.1  # Adam on tabular logits: K = 10 reaches error 0.002 in 200 steps (1e-3 stayed at 0.86)

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
        check_choice("mode", self.mode, tuple(MODES))
        self.objective = MODES[self.mode]
        check_choice("dtype", self.dtype, ("float32", "float64"))
        self.n_actions = self.K
        self._labels: Tensor | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def memory(self) -> tuple[int, int]:
        """The logit table [S, N, K]; a step's [S, rows, K] logits, probabilities, rewards and
        gradients (every context in exact mode)."""
        rows = self.N if self.objective.enumerates else self.batch_size * self.samples_per_context
        size = self.torch_dtype.itemsize
        return self.population * self.N * self.K * size, 8 * self.population * rows * self.K * size

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
    def draw_batch(self, generator):
        if not self.objective.enumerates:
            return super().draw_batch(generator)
        contexts = self.all_contexts()
        return Batch(obs=contexts, rows=contexts, group=torch.arange(self.N))

    def score(self, params, rollout, grad=True):
        if not self.objective.enumerates:
            return super().score(params, rollout, grad)
        # every (context, action) row: log π(a|n) for all contexts at once, no per-row logits
        log_probs = log_softmax(params[0])  # [S, N, K]
        S, N, K = log_probs.shape
        return Scored(
            logp=log_probs.reshape(S, N * K, 1),
            target_logp=log_probs.gather(-1, self.label_table.unsqueeze(-1)).repeat_interleave(K, dim=1),
            providers={"probs": lambda: log_probs.detach().exp().repeat_interleave(K, dim=1)},
        )

    # ------------------------------------------------------------------ evaluation and oracles
    def evaluate(self, params, generator):
        return {"error": 1 - expected_return(params[0].detach(), self.label_table)}

    def oracle_contexts(self, rollout):
        return self.all_contexts()

    def update_diagnostics(self, params, rollout, grad, estimator, terms_of=None):
        """Cosines of the update to ∇J and to the CE oracle (over all contexts); for each
        reference estimator, the cosines of *its* exact expected update at the same parameters."""
        metrics = super().update_diagnostics(params, rollout, grad, estimator)
        if self.reference_estimators:
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


__all__ = ["Bandit", "GaussianBandit"]
