"""The estimator contract (DESIGN.md, Contracts): ``PGTerms`` in, ``EstimatorOutput(loss, metrics)``
out; ``TokenLoss`` is what a per-token estimator returns before aggregation.

Notation (shared/spec/estimators.md): π_θ learner, μ behaviour, π_prox proximal policy
(defaults to μ), A advantage, m token mask, ℓ = −log π_θ(a).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from sandbox.core.validation import check_shape, check_tensor, on_host

#: how far above 0 a log-probability may round (a fused kernel's chunked log-sum-exp)
LOGP_TOLERANCE = 1e-4


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
            if on_host(per_member) and not bool(per_member.all()):
                raise ValueError(
                    "mask has no valid (True) token for at least one population member; "
                    "every batch needs at least one valid token"
                )
        for name in ("logp", "behavior_logp", "proximal_logp", "target_logp"):
            value = getattr(self, name)
            if value is not None and on_host(value):
                highest = float((value.detach() if self.mask is None else value.detach()[self.mask]).max())
                if highest > LOGP_TOLERANCE:
                    raise ValueError(f"{name} must hold log-probabilities (≤ 0) at valid tokens, got a value of "
                                     f"{highest:.4g}: pass log π, not π or logits")
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
