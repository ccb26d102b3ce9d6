"""Toy batches built from a logits tensor, so autograd gradients can be compared with the
analytic form  ∇_z loss = Σ_t c_t · (e_{a_t} − softmax(z_t))  for a per-token weight c_t."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sandbox import PGTerms


@dataclass
class Toy:
    logits: torch.Tensor  # [*P, B, T, K] leaf
    actions: torch.Tensor  # [*P, B, T]
    advantages: torch.Tensor  # [*P, B]
    mask: torch.Tensor  # [*P, B, T]
    behavior_logp: torch.Tensor  # [*P, B, T]

    def logp(self) -> torch.Tensor:
        return torch.log_softmax(self.logits, -1).gather(-1, self.actions.unsqueeze(-1)).squeeze(-1)

    def terms(self, **overrides) -> PGTerms:
        kwargs = dict(
            logp=self.logp(),
            advantages=self.advantages,
            mask=self.mask,
            behavior_logp=self.behavior_logp,
        )
        kwargs.update(overrides)
        return PGTerms(**kwargs)

    def analytic_grad(self, weight: torch.Tensor) -> torch.Tensor:
        """Σ_t c_t ∇_z log π(a_t): weight [*P, B, T] → gradient [*P, B, T, K]."""
        probs = torch.softmax(self.logits.detach(), -1)
        onehot = torch.nn.functional.one_hot(self.actions, self.logits.shape[-1]).to(probs.dtype)
        return weight.unsqueeze(-1) * (onehot - probs)

    def autograd_grad(self, loss: torch.Tensor) -> torch.Tensor:
        (grad,) = torch.autograd.grad(loss, self.logits)
        return grad


def make_toy(
    shape=(4, 3), K=5, seed=0, pop=(), off_policy=0.3, ragged=True, dtype=torch.float64
) -> Toy:
    g = torch.Generator().manual_seed(seed)
    B, T = shape
    logits = torch.randn(*pop, B, T, K, generator=g, dtype=dtype).requires_grad_(True)
    actions = torch.randint(0, K, (*pop, B, T), generator=g)
    advantages = torch.randn(*pop, B, generator=g, dtype=dtype)
    mask = torch.ones(*pop, B, T, dtype=torch.bool)
    if ragged and T > 1:
        lengths = torch.randint(1, T + 1, (*pop, B), generator=g)
        mask = torch.arange(T) < lengths.unsqueeze(-1)
    logp = torch.log_softmax(logits.detach(), -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    behavior = (logp + off_policy * torch.randn(*pop, B, T, generator=g, dtype=dtype)).clamp(max=0.0)  # log μ ≤ 0
    return Toy(logits, actions, advantages, mask, behavior)


def n_valid(mask: torch.Tensor) -> torch.Tensor:
    return mask.sum((-2, -1), keepdim=True).to(torch.float64)


def grad_ok(toy: Toy, out, weight: torch.Tensor, atol: float = 1e-12) -> bool:
    """Autograd gradient of ``out.loss`` equals Σ_t weight_t·∇_z log π(a_t)."""
    return torch.allclose(toy.autograd_grad(out.loss), toy.analytic_grad(weight), atol=atol)
