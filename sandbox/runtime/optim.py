"""Optimisers over parameters with leading population axes ``[*P, ...]``.

Every member has its own state; ``step(grads, lr_scale, active)`` scales the step per member and
leaves inactive members (skipped or diverged) untouched, optimiser state included. With no
population axis these match ``torch.optim.SGD``/``Adam`` exactly (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_range, on_host

OPTIMIZERS = ("adam", "adamw", "sgd", "normalized")
#: the fields ``optimizer_kwargs`` may set (``RunConfig``)
OPTIMIZER_KWARGS = ("betas", "eps", "weight_decay")


def _expand(x: Tensor, like: Tensor) -> Tensor:
    """[*P] → broadcastable against [*P, ...]."""
    return x.reshape(*x.shape, *([1] * (like.ndim - x.ndim)))


@dataclass
class PopulationOptimizer:
    """``name``: 'adam' | 'adamw' | 'sgd' | 'normalized' (z ← z − α·g/‖g‖, the theory figures' step,
    with the norm per population member over all parameters). 'adamw' is Adam with decoupled weight
    decay, p ← p·(1 − lr·λ) before the Adam step (Loshchilov & Hutter, arXiv 1711.05101, as
    ``torch.optim.AdamW``); ``weight_decay`` λ defaults to torch's 0.01 for 'adamw', 0 otherwise."""

    name: str = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float | None = None

    def __post_init__(self) -> None:
        check_choice("optimizer", self.name, OPTIMIZERS)
        check_range("lr", self.lr, low=0.0, low_open=True)
        if not (isinstance(self.betas, (tuple, list)) and len(self.betas) == 2):
            raise ValueError(f"betas must be a pair (β1, β2), got {self.betas!r}")
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        check_range("betas[0]", self.betas[0], low=0.0, high=1.0, high_open=True)
        check_range("betas[1]", self.betas[1], low=0.0, high=1.0, high_open=True)
        check_range("eps", self.eps, low=0.0)
        if self.weight_decay is None:
            self.weight_decay = 0.01 if self.name == "adamw" else 0.0
        check_range("weight_decay", self.weight_decay, low=0.0, high=1.0)
        if self.weight_decay and self.name not in ("adamw",):
            raise ValueError(f"weight_decay is decoupled weight decay of optimizer 'adamw', got optimizer={self.name!r} "
                             f"with weight_decay={self.weight_decay}")
        self._state: list[tuple[Tensor, Tensor]] | None = None
        self._t: Tensor | None = None

    def step(
        self,
        params: Sequence[Tensor],
        grads: Sequence[Tensor],
        population_shape: tuple[int, ...] = (),
        lr_scale: Tensor | None = None,
        active: Tensor | None = None,
    ) -> None:
        """Update ``params`` in place (under no_grad)."""
        ref = params[0]
        if lr_scale is None:
            lr_scale = torch.ones(population_shape, dtype=ref.dtype, device=ref.device)
        if active is None:
            active = torch.ones(population_shape, dtype=torch.bool, device=ref.device)
        with torch.no_grad():
            if self.name == "sgd":
                for p, g in zip(params, grads):
                    p.sub_(_expand(torch.where(active, self.lr * lr_scale, 0.0).to(p.dtype), p) * g)
            elif self.name == "normalized":
                sq = sum(g.reshape(*population_shape, -1).pow(2).sum(-1) for g in grads)
                norm = torch.sqrt(sq)
                step = torch.where(active & (norm > 0), self.lr * lr_scale / norm.clamp(min=1e-300), 0.0)
                for p, g in zip(params, grads):
                    p.sub_(_expand(step.to(p.dtype), p) * g)
            else:
                self._adam(params, grads, population_shape, lr_scale, active)

    def _adam(self, params, grads, population_shape, lr_scale, active) -> None:
        b1, b2 = self.betas
        if self._state is None:
            self._state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
            self._t = torch.zeros(population_shape, dtype=torch.long, device=params[0].device)
        everyone = bool(active.all()) if on_host(active) else False  # off the host: the masked path, no wait
        frozen = None if everyone else [(m.clone(), v.clone(), p.detach().clone())
                                        for (m, v), p in zip(self._state, params)]
        self._t = self._t + active.long()
        t = self._t.to(torch.float64).clamp(min=1)
        bc1 = 1 - torch.pow(b1, t)
        bc2_sqrt = torch.sqrt(1 - torch.pow(b2, t))
        step = torch.where(active, self.lr * lr_scale / bc1, 0.0)
        decay = torch.where(active, 1 - self.lr * lr_scale * self.weight_decay, 1.0) if self.weight_decay else None
        for p, g, (m, v) in zip(params, grads, self._state):
            if decay is not None:  # AdamW: p ← p·(1 − lr·λ), then the Adam step
                p.mul_(_expand(decay.to(p.dtype), p))
            # torch.optim.Adam: m ← β1 m + (1 − β1) g; v ← β2 v + (1 − β2) g²;
            # p ← p − lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps), in place, bias corrections per member
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = v.sqrt().div_(_expand(bc2_sqrt.to(p.dtype), p)).add_(self.eps)
            p.sub_(m.div(denom).mul_(_expand(step.to(p.dtype), p)))
        if frozen is not None:  # inactive members keep their parameters and moments
            for (p, (m, v)), (m0, v0, p0) in zip(zip(params, self._state), frozen):
                keep = _expand(~active, p)
                m.copy_(torch.where(keep, m0, m))
                v.copy_(torch.where(keep, v0, v))
                p.copy_(torch.where(keep, p0, p))

    def state_dict(self) -> dict:
        return {"state": self._state, "t": self._t}

    def load_state_dict(self, state: dict) -> None:
        self._state, self._t = state["state"], state["t"]


__all__ = ["OPTIMIZERS", "OPTIMIZER_KWARGS", "PopulationOptimizer"]
