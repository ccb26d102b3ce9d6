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
from jaxtyping import Bool, Float
from torch import Tensor

from sandbox.core.registry import Registry
from sandbox.core.terms import EstimatorOutput, PGTerms, TokenLoss
from sandbox.core.validation import check_choice, check_range
from sandbox.estimators.rollout_corr import check_verl_metrics, rollout_corr_metrics
from sandbox.estimators.trl_metrics import TRAINERS, trl_async_metrics, trl_sampling_metrics
from sandbox.estimators.trl_metrics import check_bounds as check_trl_bounds

#: the rollout IS correction's modes (``Estimator.rollout_is``): granularity × constraint, TRL's names
ROLLOUT_IS_MODES: tuple[str, ...] = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
AGGREGATIONS: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)


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
    """Ratio statistics, ESS/B, the k1/k3 estimates of KL(μ‖π_θ) from samples of μ and the mean and
    largest |log r| over valid tokens (the signals of ``sandbox.diagnostics.SIGNALS``).

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
        "log_ratio_abs_mean": masked_mean(log_r.abs(), mask),
        "log_ratio_abs_max": masked_amax(log_r.abs(), mask),
    }


# --------------------------------------------------------------------------- base class
ESTIMATORS: Registry[Estimator] = Registry("estimator")


def register_estimator(name: str, *, replace: bool = False):
    """Class decorator registering an estimator under ``name`` (see README and docs/estimators.md, "Add an estimator")."""
    return ESTIMATORS.register(name, replace=replace)


def make_estimator(name: str, **kwargs) -> Estimator:
    """``make_estimator("dg", eta=0.5)``; unknown names or hyperparameters raise ``ValueError``."""
    return ESTIMATORS.make(name, **kwargs)


@dataclass(frozen=True)
class Estimator:
    """Base class. Subclasses implement ``token_loss`` (per-token losses) and, optionally,
    ``check`` (hyperparameter validation).

    Capabilities (class attributes the runtime reads; never checks of names):
    ``needs_behavior`` — μ is required; ``recomputes_proximal`` — π_prox is the learner's own
    log-probs at the start of the update (decoupled PPO) under ``proximal='auto'``;
    ``batch_dependent`` — the per-token loss depends on the whole batch, so no exact expected
    update by enumeration; ``screens_rows`` — a ``keep_mask(terms)`` selects the tokens that
    reach the backward pass (Kondo), so a screened trainer may skip the others;
    ``fits_target`` — the loss is on the supervised target's tokens (cross-entropy).

    ``kl_coef`` = τ adds the squared-log-ratio penalty τ·(log π_θ − log μ)² to every token's loss
    (prime-rl's ``kl_tau``, Kimi K2.5), aggregated like the rest: one field composes it with every
    estimator that builds its loss from ``token_loss``.

    ``rollout_is`` multiplies every token's loss by the rollout correction w = sg(π_prox/μ) — per
    token, or the sequence's product ratio — truncated to [``rollout_is_min``, ``rollout_is_max``]
    (``*_truncate``) or zeroed outside it (``*_mask``): verl's ``rollout_is`` weights in decoupled
    mode and TRL's vLLM importance-sampling correction, composed with any loss. w = 1 when π_prox
    = μ (``proximal='behavior'``, the default); it corrects the engine's μ towards a recomputed
    π_prox (``proximal='recompute'``)."""

    aggregation: str = field(default="token-mean", kw_only=True)
    kl_coef: float = field(default=0.0, kw_only=True)  # τ ≥ 0 (needs μ when > 0)
    rollout_is: str | None = field(default=None, kw_only=True)  # None or one of ROLLOUT_IS_MODES
    rollout_is_max: float = field(default=2.0, kw_only=True)  # upper bound > 0 (inf: none)
    rollout_is_min: float | None = field(default=None, kw_only=True)  # lower bound in [0, max) or None
    #: (level, upper, lower): also log verl's ``rollout_corr/*`` metrics as verl computes them
    #: (``sandbox.estimators.rollout_corr``); () logs none. Changes no loss.
    verl_metrics: tuple = field(default=(), kw_only=True)
    #: also log the metrics TRL's trainer logs, as it computes them (``sandbox.estimators.trl_metrics``):
    #: 'grpo' (GRPOTrainer's ``sampling/*`` of this ``rollout_is`` weight; needs ``rollout_is``),
    #: 'async_grpo' (AsyncGRPOTrainer's ``ratio``, ``kl``), or None. Changes no loss.
    trl_metrics: str | None = field(default=None, kw_only=True)

    name: ClassVar[str] = "estimator"
    needs_behavior: ClassVar[bool] = False
    recomputes_proximal: ClassVar[bool] = False
    screens_rows: ClassVar[bool] = False
    fits_target: ClassVar[bool] = False
    #: where our defaults differ from (or were checked against) the authors' recommended values:
    #: those values and their source; ``sandbox list`` shows it after the defaults ("authors: …")
    authors_defaults: ClassVar[str] = ""

    @property
    def batch_dependent(self) -> bool:
        """Whether a row's loss depends on the other rows (batch quantiles, group softmax, top-k)."""
        return False

    def __post_init__(self) -> None:
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        check_range("kl_coef", self.kl_coef, low=0.0)
        if self.kl_coef > 0 and type(self).__call__ is not Estimator.__call__:
            raise ValueError(
                f"kl_coef must be 0 for {self.name}: it computes its own loss instead of token_loss, "
                "so the penalty would not be added"
            )
        if self.rollout_is is not None:
            check_choice("rollout_is", self.rollout_is, ROLLOUT_IS_MODES)
            if type(self).__call__ is not Estimator.__call__:
                raise ValueError(f"rollout_is must be None for {self.name}: it computes its own loss instead of "
                                 "token_loss, so the correction would not be applied")
        check_range("rollout_is_max", self.rollout_is_max, low=0.0, low_open=True, finite=False)
        check_range("rollout_is_min", self.rollout_is_min, low=0.0, high=self.rollout_is_max, high_open=True,
                    allow_none=True)
        object.__setattr__(self, "verl_metrics", check_verl_metrics(self.verl_metrics))
        if self.trl_metrics is not None:
            check_choice("trl_metrics", self.trl_metrics, tuple(TRAINERS))
            if self.trl_metrics == "grpo" and self.rollout_is is None:
                raise ValueError("trl_metrics='grpo' needs rollout_is: GRPOTrainer logs its sampling/* metrics only "
                                 "with its vLLM correction")
            if self.trl_metrics == "grpo":  # the bounds GRPOConfig accepts for this mode
                check_trl_bounds(self.rollout_is, _open(self.rollout_is_max), self.rollout_is_min)
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
        out = self.penalized_token_loss(terms)
        mask = terms.valid if out.mask is None else out.mask
        per_member = aggregate(out.values, mask, self.aggregation)
        return EstimatorOutput(loss=per_member.sum(), metrics=self.diagnostics(terms, out))

    def penalized_token_loss(self, terms: PGTerms) -> TokenLoss:
        """``token_loss`` plus τ·(log π_θ − log μ)² per token when ``kl_coef`` = τ > 0; the
        per-token loss whose aggregate is the estimator's loss (also what exact enumeration needs)."""
        out = self.token_loss(terms)
        if isinstance(out, Tensor):
            out = TokenLoss(out)
        if tuple(out.values.shape) != tuple(terms.logp.shape):
            raise ValueError(
                f"{self.name}.token_loss returned shape {tuple(out.values.shape)}, "
                f"expected logp's {tuple(terms.logp.shape)}"
            )
        if self.rollout_is is not None:
            w = self.rollout_is_weight(terms)
            out = TokenLoss(out.values * w, out.mask, {**out.metrics, "rollout_is_mean": masked_mean(w, terms.valid),
                                                       **self.rollout_is_fraction(terms)})
        if self.kl_coef == 0:
            return out
        sq = (terms.logp - terms.require_behavior(f"{self.name} with kl_coef > 0")).pow(2)
        metrics = {**out.metrics, "kl_sq_mean": masked_mean(sg(sq), terms.valid)}
        return TokenLoss(out.values + self.kl_coef * sq, out.mask, metrics)

    def rollout_is_raw(self, terms: PGTerms) -> Tensor:
        """The detached raw rollout correction ``[*P, B, T]`` before its bounds: π_prox/μ per token,
        or the sequence's product ratio Σ_t m·(log π_prox − log μ) broadcast over its tokens."""
        mu = terms.require_behavior(f"{self.name} with rollout_is")
        prox = sg(terms.require_proximal(self.name))
        mask = terms.valid
        log_w = torch.where(mask, prox - mu, prox.new_zeros(()))
        if self.rollout_is.startswith("sequence"):
            log_w = sequence_log_ratio(prox, mu, mask).unsqueeze(-1).expand_as(log_w)
        return torch.exp(log_w)

    def rollout_is_weight(self, terms: PGTerms) -> Tensor:
        """The detached rollout correction ``[*P, B, T]`` (``rollout_is_raw``), truncated or masked."""
        w = self.rollout_is_raw(terms)
        low = 0.0 if self.rollout_is_min is None else self.rollout_is_min
        if self.rollout_is.endswith("truncate"):
            return w.clamp(min=low, max=self.rollout_is_max)
        return w * ((w >= low) & (w <= self.rollout_is_max)).to(w.dtype)

    def rollout_is_fraction(self, terms: PGTerms) -> dict[str, Tensor]:
        """The fraction of valid tokens whose rollout correction is truncated (``*_truncate``:
        ``rollout_is_clip_frac``) or zeroed (``*_mask``: ``rollout_is_mask_frac``): raw weight
        outside [``rollout_is_min`` (0 when None), ``rollout_is_max``]."""
        w = self.rollout_is_raw(terms)
        low = 0.0 if self.rollout_is_min is None else self.rollout_is_min
        outside = ((w < low) | (w > self.rollout_is_max)).to(w.dtype)
        key = "rollout_is_clip_frac" if self.rollout_is.endswith("truncate") else "rollout_is_mask_frac"
        return {key: masked_mean(outside, terms.valid)}

    def diagnostics(self, terms: PGTerms, out: TokenLoss) -> dict[str, Tensor]:
        """Common diagnostics (surprisal, ratio statistics, ESS/B, k1/k3 KL when μ is known)
        merged with the estimator's own."""
        with torch.no_grad():
            logp = terms.logp.detach()
            mask = terms.valid
            metrics = {"surprisal_mean": masked_mean(-logp, mask)}
            if terms.behavior_logp is not None:
                metrics.update(behavior_diagnostics(logp, terms.behavior_logp, mask))
                if self.verl_metrics:  # π_old (decoupled) or π_θ (bypass): equal within one update
                    train = logp if terms.proximal_logp is None else terms.proximal_logp.detach()
                    metrics.update({f"rollout_corr/{k}": v for k, v in rollout_corr_metrics(
                        train, terms.behavior_logp, mask, *self.verl_metrics).items()})
                if self.trl_metrics == "grpo":  # the weight's π_prox (TRL: π_old, recomputed) against vLLM's μ
                    prox = logp if terms.proximal_logp is None else terms.proximal_logp.detach()
                    metrics.update(trl_sampling_metrics(prox, terms.behavior_logp, mask, self.rollout_is,
                                                        _open(self.rollout_is_max), self.rollout_is_min))
                elif self.trl_metrics == "async_grpo":  # π_θ against π_old = vLLM's μ
                    metrics.update(trl_async_metrics(logp, terms.behavior_logp, mask))
            metrics.update({k: v.detach() for k, v in out.metrics.items()})
        return metrics

    def hyperparameters(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _open(bound: float) -> float | None:
    """An infinite bound as TRL writes it: None."""
    return None if math.isinf(bound) else bound


def sg(x: Tensor) -> Tensor:
    """Stop-gradient."""
    return x.detach()
