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

from sandbox.validation import check_choice, check_range

OPTIMIZERS = ("adam", "sgd", "normalized")


def _expand(x: Tensor, like: Tensor) -> Tensor:
    """[*P] → broadcastable against [*P, ...]."""
    return x.reshape(*x.shape, *([1] * (like.ndim - x.ndim)))


@dataclass
class PopulationOptimizer:
    """``name``: 'adam' | 'sgd' | 'normalized' (z ← z − α·g/‖g‖, the theory figures' step, with the
    norm per population member over all parameters)."""

    name: str = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        check_choice("optimizer", self.name, OPTIMIZERS)
        check_range("lr", self.lr, low=0.0, low_open=True)
        check_range("betas[0]", self.betas[0], low=0.0, high=1.0, high_open=True)
        check_range("betas[1]", self.betas[1], low=0.0, high=1.0, high_open=True)
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
        self._t = self._t + active.long()
        t = self._t.to(torch.float64)
        bc1 = 1 - torch.pow(b1, t)
        bc2 = 1 - torch.pow(b2, t)
        for p, g, (m, v) in zip(params, grads, self._state):
            act = _expand(active, p)
            m.copy_(torch.where(act, b1 * m + (1 - b1) * g, m))
            v.copy_(torch.where(act, b2 * v + (1 - b2) * g * g, v))
            # torch.optim.Adam: p −= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps)
            step_size = _expand(torch.where(active, self.lr * lr_scale / bc1.clamp(min=1e-300), 0.0).to(p.dtype), p)
            denom = v.sqrt() / _expand(torch.sqrt(bc2).clamp(min=1e-300).to(p.dtype), p) + self.eps
            p.sub_(step_size * m / denom)

    def state_dict(self) -> dict:
        return {"state": self._state, "t": self._t}

    def load_state_dict(self, state: dict) -> None:
        self._state, self._t = state["state"], state["t"]


__all__ = ["OPTIMIZERS", "PopulationOptimizer"]
