"""The estimator contract: ``PGTerms`` in, ``EstimatorOutput(loss, metrics)`` out.

Every estimator is a frozen dataclass whose fields are its hyperparameters, registered by name.
The loss is "minus the objective": its gradient *is* the estimator. Tensors may carry leading
population axes ``*P`` (S seeds trained as one batched computation); the loss is aggregated per
population member and then summed, so members never mix.

Notation (shared/spec/estimators.md): π_θ learner, μ behaviour, π_prox proximal policy
(defaults to μ), A advantage, m token mask, ℓ = −log π_θ(a).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from sandbox.registry import Registry
from sandbox.validation import check_choice, check_shape, check_tensor

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
AGGREGATIONS: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)


@dataclass(frozen=True)
class PGTerms:
    """What an estimator sees of a batch. Shapes: ``[*P, B, T]`` per token, ``[*P, B]`` per sequence.

    Attributes:
        logp: learner log-probs log π_θ(a_t) of the taken tokens; differentiable.
        advantages: A per sequence ``[*P, B]`` (broadcast to tokens) or per token ``[*P, B, T]``.
        mask: valid tokens (bool); ``None`` means every token is valid.
        behavior_logp: log μ(a_t) as the actor *reported* it; required by estimators that need μ.
        proximal_logp: log π_prox(a_t), the anchor of trust-region methods; defaults to μ.
        group: prompt/context id per sequence ``[*P, B]`` or ``[B]``.
        target_logp: learner log-probs of the supervised target (for ``xent`` only).
        generator: the random source for stochastic estimators (stochastic DG, uniform Kondo).
    """

    logp: Float[Tensor, "*P B T"]
    advantages: Float[Tensor, "*P B"] | Float[Tensor, "*P B T"]
    mask: Bool[Tensor, "*P B T"] | None = None
    behavior_logp: Float[Tensor, "*P B T"] | None = None
    proximal_logp: Float[Tensor, "*P B T"] | None = None
    group: Int[Tensor, "*P B"] | Int[Tensor, " B"] | None = None
    target_logp: Float[Tensor, "*P B T"] | None = None
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        logp = check_tensor("logp", self.logp, dtype="float")
        if logp.ndim < 2:
            raise ValueError(f"logp must have shape [*P, B, T] (at least 2 dims), got {tuple(logp.shape)}")
        shape = tuple(logp.shape)
        if logp.numel() == 0:
            raise ValueError(f"logp is empty (shape {shape}): a batch needs at least one sequence of one token")
        adv = check_tensor("advantages", self.advantages, dtype="float")
        if tuple(adv.shape) not in (shape, shape[:-1]):
            raise ValueError(
                f"advantages must have shape {shape[:-1]} (per sequence) or {shape} (per token), "
                f"matching logp {shape}; got {tuple(adv.shape)}"
            )
        for name in ("behavior_logp", "proximal_logp", "target_logp"):
            value = getattr(self, name)
            if value is not None:
                check_tensor(name, value, dtype="float")
                check_shape(name, value, shape, "logp")
        if self.mask is not None:
            check_tensor("mask", self.mask, dtype="bool")
            check_shape("mask", self.mask, shape, "logp")
            per_member = self.mask.flatten(-2).any(-1)
            if not bool(per_member.all()):
                raise ValueError(
                    "mask has no valid (True) token for at least one population member; "
                    "every batch needs at least one valid token"
                )
        if self.group is not None:
            check_tensor("group", self.group, dtype="int")
            if tuple(self.group.shape) not in (shape[:-1], shape[-2:-1]):
                raise ValueError(
                    f"group must have shape {shape[:-1]} or {shape[-2:-1]}, got {tuple(self.group.shape)}"
                )
        if self.generator is not None and not isinstance(self.generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator, got {type(self.generator).__name__}")

    # ----------------------------------------------------------------- derived views
    @property
    def valid(self) -> Bool[Tensor, "*P B T"]:
        """The token mask, all True when none was given."""
        if self.mask is None:
            return torch.ones_like(self.logp, dtype=torch.bool)
        return self.mask

    @property
    def token_advantages(self) -> Float[Tensor, "*P B T"]:
        """A broadcast to tokens (explicit, documented broadcast of a per-sequence advantage)."""
        if self.advantages.shape == self.logp.shape:
            return self.advantages
        return self.advantages.unsqueeze(-1).expand_as(self.logp)

    def require_behavior(self, who: str) -> Tensor:
        if self.behavior_logp is None:
            raise ValueError(f"{who} needs behavior_logp (log μ of the sampled tokens); got None")
        return self.behavior_logp

    def require_proximal(self, who: str) -> Tensor:
        if self.proximal_logp is not None:
            return self.proximal_logp
        if self.behavior_logp is not None:
            return self.behavior_logp
        raise ValueError(
            f"{who} needs proximal_logp (log π_prox) or, as its default, behavior_logp; got neither"
        )

    def require_generator(self, who: str) -> torch.Generator:
        if self.generator is None:
            raise ValueError(f"{who} draws random numbers and needs generator (a torch.Generator); got None")
        return self.generator

    @property
    def population_shape(self) -> tuple[int, ...]:
        return tuple(self.logp.shape[:-2])


@dataclass(frozen=True)
class EstimatorOutput:
    """``loss``: a scalar whose gradient is the estimator. ``metrics``: diagnostics, each a tensor
    of shape ``[*P]`` (a scalar without a population axis), detached."""

    loss: Tensor
    metrics: dict[str, Tensor]


@dataclass(frozen=True)
class TokenLoss:
    """What ``Estimator.token_loss`` returns: per-token losses ``[*P, B, T]``, optionally the mask
    to aggregate over (defaults to the valid tokens) and estimator-specific metrics ``[*P]``."""

    values: Tensor
    mask: Tensor | None = None
    metrics: dict[str, Tensor] = field(default_factory=dict)


# --------------------------------------------------------------------------- aggregation
def aggregate(
    values: Float[Tensor, "*P B T"], mask: Bool[Tensor, "*P B T"], mode: str
) -> Float[Tensor, "*P"]:
    """Reduce per-token losses to one value per population member.

    token-mean: Σ m·L / Σ m. seq-mean-token-mean: mean over sequences of Σ_t m·L / Σ_t m.
    seq-mean-token-sum: mean over sequences of Σ_t m·L. seq-mean-token-sum-norm (Dr. GRPO):
    Σ m·L / (n_seq · T), T the padded length. Sequence means run over sequences with at least one
    valid token; a member whose mask is empty contributes 0.
    """
    check_choice("aggregation", mode, AGGREGATIONS)
    m = mask.to(values.dtype)
    masked = torch.where(mask, values, values.new_zeros(()))
    if mode == "token-mean":
        return masked.sum((-2, -1)) / m.sum((-2, -1)).clamp(min=1.0)
    tokens_per_seq = m.sum(-1)
    has_tokens = (tokens_per_seq > 0).to(values.dtype)
    n_seq = has_tokens.sum(-1).clamp(min=1.0)
    seq_sum = masked.sum(-1)
    if mode == "seq-mean-token-mean":
        return (seq_sum / tokens_per_seq.clamp(min=1.0) * has_tokens).sum(-1) / n_seq
    if mode == "seq-mean-token-sum":
        return seq_sum.sum(-1) / n_seq
    return seq_sum.sum(-1) / (n_seq * values.shape[-1])


def masked_mean(x: Tensor, mask: Tensor, dims: tuple[int, ...] = (-2, -1)) -> Tensor:
    m = mask.to(x.dtype)
    return torch.where(mask, x, x.new_zeros(())).sum(dims) / m.sum(dims).clamp(min=1.0)


def masked_amin(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask, x, x.new_full((), math.inf)).flatten(-2).amin(-1)


def masked_amax(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask, x, x.new_full((), -math.inf)).flatten(-2).amax(-1)


def sequence_log_ratio(
    logp: Tensor, ref_logp: Tensor, mask: Tensor, geometric: bool = False
) -> Float[Tensor, "*P B"]:
    """log ρ_i = Σ_t m·(log π − log ref) (product form) or its mean over valid tokens (geometric)."""
    diff = torch.where(mask, logp - ref_logp, logp.new_zeros(()))
    total = diff.sum(-1)
    if geometric:
        return total / mask.sum(-1).clamp(min=1).to(logp.dtype)
    return total


def effective_sample_size_fraction(log_weights: Tensor, valid: Tensor) -> Tensor:
    """ESS/B = (Σρ)² / (B·Σρ²) over the valid sequences, computed in log space for stability."""
    neg_inf = log_weights.new_full((), -math.inf)
    lw = torch.where(valid, log_weights, neg_inf)
    n = valid.sum(-1).clamp(min=1).to(log_weights.dtype)
    return torch.exp(2 * torch.logsumexp(lw, -1) - torch.logsumexp(2 * lw, -1)) / n


def behavior_diagnostics(logp: Tensor, behavior_logp: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """Ratio statistics, ESS/B and the k1/k3 estimates of KL(μ‖π_θ) from samples of μ.

    k1 = E_μ[log μ − log π_θ]; k3 = E_μ[(r − 1) − log r], r = π_θ/μ (Schulman's estimators).
    """
    log_r = logp - behavior_logp
    r = torch.exp(log_r)
    seq_valid = mask.any(-1)
    return {
        "ratio_mean": masked_mean(r, mask),
        "ratio_min": masked_amin(r, mask),
        "ratio_max": masked_amax(r, mask),
        "ess_frac": effective_sample_size_fraction(sequence_log_ratio(logp, behavior_logp, mask), seq_valid),
        "kl_k1": masked_mean(-log_r, mask),
        "kl_k3": masked_mean(torch.expm1(log_r) - log_r, mask),
    }


# --------------------------------------------------------------------------- base class
ESTIMATORS: Registry[Estimator] = Registry("estimator")


def register_estimator(name: str, *, replace: bool = False):
    """Class decorator registering an estimator under ``name`` (see README, "Add an estimator")."""
    return ESTIMATORS.register(name, replace=replace)


def make_estimator(name: str, **kwargs) -> Estimator:
    """``make_estimator("dg", eta=0.5)``; unknown names or hyperparameters raise ``ValueError``."""
    return ESTIMATORS.make(name, **kwargs)


@dataclass(frozen=True)
class Estimator:
    """Base class. Subclasses implement ``token_loss`` (per-token losses) and, optionally,
    ``check`` (hyperparameter validation). ``needs_behavior`` says whether μ is required."""

    aggregation: str = field(default="token-mean", kw_only=True)

    name: ClassVar[str] = "estimator"
    needs_behavior: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        self.check()

    def check(self) -> None:
        """Validate hyperparameters; raise ``ValueError`` naming the field and its valid range."""

    def token_loss(self, terms: PGTerms) -> TokenLoss | Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement token_loss(terms)")

    def __call__(self, terms: PGTerms) -> EstimatorOutput:
        if not isinstance(terms, PGTerms):
            raise ValueError(f"terms must be a PGTerms, got {type(terms).__name__}")
        if self.needs_behavior:
            terms.require_behavior(self.name)
        out = self.token_loss(terms)
        if isinstance(out, Tensor):
            out = TokenLoss(out)
        if tuple(out.values.shape) != tuple(terms.logp.shape):
            raise ValueError(
                f"{self.name}.token_loss returned shape {tuple(out.values.shape)}, "
                f"expected logp's {tuple(terms.logp.shape)}"
            )
        mask = terms.valid if out.mask is None else out.mask
        per_member = aggregate(out.values, mask, self.aggregation)
        return EstimatorOutput(loss=per_member.sum(), metrics=self.diagnostics(terms, out))

    def diagnostics(self, terms: PGTerms, out: TokenLoss) -> dict[str, Tensor]:
        """Common diagnostics (surprisal, ratio statistics, ESS/B, k1/k3 KL when μ is known)
        merged with the estimator's own."""
        with torch.no_grad():
            logp = terms.logp.detach()
            mask = terms.valid
            metrics = {"surprisal_mean": masked_mean(-logp, mask)}
            if terms.behavior_logp is not None:
                metrics.update(behavior_diagnostics(logp, terms.behavior_logp, mask))
            metrics.update({k: v.detach() for k, v in out.metrics.items()})
        return metrics

    def hyperparameters(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def sg(x: Tensor) -> Tensor:
    """Stop-gradient."""
    return x.detach()
