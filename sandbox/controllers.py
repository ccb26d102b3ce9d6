"""Update-level transforms applied between the backward pass and the optimiser.

``controller.step(grads, terms, metrics) -> ControllerOutput(grads, metrics, skip)``. Gradients may
carry leading population axes ``*P`` (taken from ``terms.population_shape``, or the
``population_shape`` argument): every norm and cosine is per population member.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.registry import Registry
from sandbox.core.validation import NonFiniteError, check_choice, check_range, check_tensor, on_host
from sandbox.diagnostics import cosine, effective_sample_size_fraction
from sandbox.estimators.base import PGTerms, sequence_log_ratio

CONTROLLERS: Registry[Controller] = Registry("controller")
GAC_MEMORY = ("raw", "applied")


def register_controller(name: str, *, replace: bool = False):
    return CONTROLLERS.register(name, replace=replace)


def make_controller(name: str, **kwargs) -> Controller:
    """``make_controller("gac", c_proj=0.5)``; unknown names or fields raise ``ValueError``."""
    return CONTROLLERS.make(name, **kwargs)


@dataclass(frozen=True)
class ControllerOutput:
    """``grads``: the transformed gradients (same shapes as given); ``metrics``: ``[*P]`` tensors;
    ``skip``: ``[*P]`` bool, True where the optimiser must not step at all; ``lr_scale``: ``[*P]``
    multiplier of the optimiser's step size (VCPO scales the step, which Adam's scale invariance
    would undo if applied to the gradient)."""

    grads: list[Tensor]
    metrics: dict[str, Tensor]
    skip: Tensor
    lr_scale: Tensor


def flatten_grads(grads: Sequence[Tensor], population_shape: tuple[int, ...]) -> Tensor:
    """Concatenate gradients into ``[*P, D]``."""
    n = len(population_shape)
    for i, g in enumerate(grads):
        if tuple(g.shape[:n]) != tuple(population_shape):
            raise ValueError(
                f"grads[{i}] must start with the population shape {tuple(population_shape)}, got {tuple(g.shape)}"
            )
    return torch.cat([g.reshape(*population_shape, -1) for g in grads], dim=-1)


def unflatten_grads(flat: Tensor, like: Sequence[Tensor]) -> list[Tensor]:
    out, start = [], 0
    n_pop = flat.ndim - 1
    for g in like:
        size = math.prod(g.shape[n_pop:])
        out.append(flat[..., start : start + size].reshape(g.shape))
        start += size
    return out


@dataclass
class Controller:
    """Base class: subclasses implement ``transform(flat [*P, D], terms, metrics)``."""

    name: ClassVar[str] = "controller"

    def state_dict(self) -> dict:
        """The controller's memory (e.g. GAC's previous gradient); hyperparameters are its config."""
        return dict(vars(self))

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    def step(
        self,
        grads: Sequence[Tensor],
        terms: PGTerms | None = None,
        metrics: dict[str, Tensor] | None = None,
        population_shape: tuple[int, ...] | None = None,
    ) -> ControllerOutput:
        if population_shape is None:
            population_shape = terms.population_shape if terms is not None else ()
        grads = list(grads)
        if not grads:
            raise ValueError("grads must hold at least one gradient tensor")
        for i, g in enumerate(grads):
            check_tensor(f"grads[{i}]", g, dtype="float", finite=False)
        flat = flatten_grads(grads, population_shape)
        if on_host(flat) and not bool(torch.isfinite(flat).all()):
            raise NonFiniteError("grads contain NaN or inf")
        new_flat, new_metrics, skip = self.transform(flat, terms, dict(metrics or {}))
        lr_scale = new_metrics.get("lr_scale", torch.ones(flat.shape[:-1], dtype=flat.dtype, device=flat.device))
        return ControllerOutput(unflatten_grads(new_flat, grads), new_metrics, skip, lr_scale)

    def transform(
        self, flat: Tensor, terms: PGTerms | None, metrics: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        """Return (gradient [*P, D], metrics [*P] — ``lr_scale`` among them if the step is scaled, skip [*P])."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget any state (a new run)."""


def _no_skip(flat: Tensor) -> Tensor:
    return torch.zeros(flat.shape[:-1], dtype=torch.bool, device=flat.device)


@register_controller("none")
@dataclass
class Identity(Controller):
    """No transform: the gradient goes to the optimiser unchanged."""

    def transform(self, flat, terms, metrics):
        return flat, {}, _no_skip(flat)


@register_controller("ess_lr")
@dataclass
class ESSStep(Controller):
    """VCPO's ESS-scaled step: scale the step size by sqrt(min(1, ESS/B)), ESS = (Σρ)²/Σρ² over the
    unclipped sequence ratios ρ_i = π_θ/μ of the batch (arXiv 2602.17616); the gradient is unchanged."""

    def transform(self, flat, terms, metrics):
        if terms is None:
            raise ValueError("ess_lr needs terms (with behavior_logp) to compute the ESS; got None")
        behavior = terms.require_behavior("ess_lr")
        valid = terms.valid
        log_rho = sequence_log_ratio(terms.logp.detach(), behavior, valid)
        ess_frac = effective_sample_size_fraction(log_rho, valid.any(-1))
        scale = torch.sqrt(torch.clamp(ess_frac, max=1.0)).to(flat.dtype)
        return flat, {"ess_frac": ess_frac, "lr_scale": scale}, _no_skip(flat)


@register_controller("gac")
@dataclass
class GradientAlignment(Controller):
    """GAC's gradient projection (arXiv 2603.01501): c = cos(g_t, m), m the remembered direction;
    if c > c_skip skip the step, elif c > c_proj remove ``strength`` × the component of g_t along m.

    ``memory='raw'`` (default, as published): m = g_{t−1}, the previous *raw* gradient, so that c
    is the consecutive-gradient cosine, the staleness signal. ``memory='applied'``: m = the last
    applied update (a skipped step leaves it unchanged); the projection then tends to alternate
    step to step. Both cosines are logged (``grad_cos_prev_raw``, ``grad_cos_prev_applied``);
    ``grad_cos_prev`` is the one that decides. Thresholds c_proj = 0.3, c_skip = 0.9 are a
    modelling choice.
    """

    c_proj: float = 0.3  # projection threshold in [-1, 1]
    c_skip: float = 0.9  # skip threshold in [c_proj, 1] (1 never skips)
    strength: float = 1.0  # fraction of the parallel component removed, in [0, 1]
    memory: str = "raw"  # 'raw' (previous gradient) | 'applied' (previous applied update)
    previous: Tensor | None = field(default=None, init=False, repr=False)  # previous raw gradient
    applied: Tensor | None = field(default=None, init=False, repr=False)  # last applied update

    def __post_init__(self) -> None:
        check_range("c_proj", self.c_proj, low=-1.0, high=1.0)
        check_range("c_skip", self.c_skip, low=self.c_proj, high=1.0)
        check_range("strength", self.strength, low=0.0, high=1.0)
        check_choice("memory", self.memory, GAC_MEMORY)

    def reset(self) -> None:
        self.previous = self.applied = None

    def transform(self, flat, terms, metrics):
        if self.previous is not None and self.previous.shape != flat.shape:
            raise ValueError(
                f"grads changed shape from {tuple(self.previous.shape)} to {tuple(flat.shape)} "
                "(flattened [*P, D]); call reset() before reusing gac for another model"
            )
        zero = torch.zeros(flat.shape[:-1], dtype=flat.dtype, device=flat.device)
        cos = {name: zero if m is None else cosine(flat, m)
               for name, m in (("raw", self.previous), ("applied", self.applied))}
        reference = self.previous if self.memory == "raw" else self.applied
        c = cos[self.memory]
        skip = c > self.c_skip
        project = (c > self.c_proj) & ~skip
        out = flat
        if reference is not None and (not on_host(project) or bool(project.any())):
            unit = reference / reference.norm(dim=-1, keepdim=True).clamp(min=1e-12)
            parallel = (flat * unit).sum(-1, keepdim=True) * unit
            out = torch.where(project.unsqueeze(-1), flat - self.strength * parallel, flat)
        out = torch.where(skip.unsqueeze(-1), torch.zeros_like(out), out)
        self.previous = flat.detach().clone()
        if self.applied is None:
            self.applied = out.detach().clone()
        else:
            self.applied = torch.where(skip.unsqueeze(-1), self.applied, out.detach())
        return out, {
            "grad_cos_prev": c,
            "grad_cos_prev_raw": cos["raw"],
            "grad_cos_prev_applied": cos["applied"],
            "gac_projected": project.to(flat.dtype),
            "gac_skipped": skip.to(flat.dtype),
        }, skip


@register_controller("clip_grad_norm")
@dataclass
class ClipGradNorm(Controller):
    """Rescale g to norm at most ``max_norm``: g·min(1, max_norm/‖g‖)."""

    max_norm: float = 1.0  # > 0

    def __post_init__(self) -> None:
        check_range("max_norm", self.max_norm, low=0.0, low_open=True, finite=False)

    def transform(self, flat, terms, metrics):
        norm = flat.norm(dim=-1)
        scale = torch.clamp(self.max_norm / norm.clamp(min=1e-12), max=1.0)
        return flat * scale.unsqueeze(-1), {"grad_norm_pre_clip": norm, "clip_scale": scale}, _no_skip(flat)
