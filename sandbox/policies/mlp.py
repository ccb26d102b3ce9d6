"""A one-hidden-layer MLP policy over a population of S independent members.

logits = relu(x·W1 + b1)·W2 + b2 with parameters ``W1 [S, d_in, H]``, ``b1 [S, H]``,
``W2 [S, H, K]``, ``b2 [S, K]``: S seeds run as one batched matmul (``torch.baddbmm``). The
initialisation is PyTorch's ``nn.Linear`` default — kaiming-uniform(a = √5) weights and biases,
both U(−1/√fan_in, 1/√fan_in) — drawn from an explicit generator.

Context ids (``ContextIdSpec``: the bandits) are read as their one-hot vectors, d_in = n_contexts.

Per-sample squared gradient norms of log π(a|x) (VCPO's minimum-variance baseline) have a closed
form: with e = onehot(a) − π, h the hidden activations and δ = (W2·e) ⊙ 1[pre-activation > 0],
‖∇ log π(a|x)‖² = ‖e‖²·(‖h‖² + 1) + ‖δ‖²·(‖x‖² + 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from sandbox.core.observations import ContextIdSpec, ContextVectorSpec
from sandbox.core.validation import check_int, check_range, check_tensor
from sandbox.policies.base import register_policy
from sandbox.policies.categorical import CategoricalPolicy


@register_policy("mlp")
@dataclass(frozen=True)
class MLP(CategoricalPolicy):
    """Sizes of the policy d_in → hidden (ReLU) → n_out; the parameters live outside (a list)."""

    d_in: int = 784
    hidden: int = 100
    n_out: int = 10

    once_per_context = True  # a forward per image: the samples of one image share it
    reads = (ContextIdSpec, ContextVectorSpec)  # ids as one-hot vectors

    @classmethod
    def from_spec(cls, spec, hidden: int = 100):
        """d_in = the vectors' dimension (or the number of context ids), n_out = the actions."""
        d_in = spec.n_contexts if isinstance(spec, ContextIdSpec) else spec.dim
        return cls(d_in, hidden, spec.n_actions)

    def __post_init__(self) -> None:
        check_int("d_in", self.d_in, low=1)
        check_int("hidden", self.hidden, low=1)
        check_int("n_out", self.n_out, low=2)

    @property
    def n_actions(self) -> int:
        return self.n_out

    @property
    def n_params(self) -> int:
        """Parameters per member: (d_in + 1)·H + (H + 1)·K (79,510 for 784 → 100 → 10)."""
        return (self.d_in + 1) * self.hidden + (self.hidden + 1) * self.n_out

    def init(self, population: int, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> list[Tensor]:
        """``[W1, b1, W2, b2]`` with nn.Linear's default init, independently per member."""
        check_range("population", population, low=1)

        def uniform(shape: tuple[int, ...], fan_in: int) -> Tensor:
            bound = 1.0 / math.sqrt(fan_in)
            return (torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1) * bound

        S, d, H, K = population, self.d_in, self.hidden, self.n_out
        return [uniform((S, d, H), d), uniform((S, H), d), uniform((S, H, K), H), uniform((S, K), H)]

    def check_params(self, params: Sequence[Tensor]) -> int:
        """Validate shapes; return the population size S."""
        if len(params) != 4:
            raise ValueError(f"params must be [W1, b1, W2, b2], got {len(params)} tensors")
        S = params[0].shape[0]
        want = [(S, self.d_in, self.hidden), (S, self.hidden), (S, self.hidden, self.n_out), (S, self.n_out)]
        for name, p, shape in zip(("W1", "b1", "W2", "b2"), params, want):
            if tuple(p.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {tuple(p.shape)}")
        return S

    def inputs(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        """``x`` as float inputs: context ids ``[S, n]`` become their one-hot vectors ``[S, n, d_in]``."""
        if x.is_floating_point():
            return x
        return torch.nn.functional.one_hot(x, self.d_in).to(params[0].dtype)

    def hidden_pre(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        """Pre-activations x·W1 + b1, ``[S, n, H]`` for inputs ``x [S, n, d_in]`` or shared ``[n, d_in]``."""
        W1, b1 = params[0], params[1]
        if x.ndim == 2:  # the same inputs for every member (evaluation)
            return torch.matmul(x, W1) + b1.unsqueeze(1)
        return torch.baddbmm(b1.unsqueeze(1), x, W1)

    def logits(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        """``[S, n, n_out]`` logits for inputs ``[S, n, d_in]`` (or ``[n, d_in]`` shared by all members)."""
        self.check_params(params)
        x = self.inputs(params, x)
        check_tensor("x", x, dtype="float", ndim=(2, 3), finite=False)
        if x.shape[-1] != self.d_in:
            raise ValueError(f"x must have last dimension d_in={self.d_in}, got shape {tuple(x.shape)}")
        h = torch.relu(self.hidden_pre(params, x))
        return torch.baddbmm(params[3].unsqueeze(1), h, params[2])

    def grad_sq_norms(self, params: Sequence[Tensor], x: Tensor, actions: Tensor) -> Tensor:
        """‖∇_θ log π(a|x)‖² per row ``[S, n]`` (closed form, see the module docstring); no autograd."""
        with torch.no_grad():
            params = [p.detach() for p in params]
            x = self.inputs(params, x)
            pre = self.hidden_pre(params, x)
            h = torch.relu(pre)
            probs = torch.softmax(torch.baddbmm(params[3].unsqueeze(1), h, params[2]), -1)
            e = -probs
            e.scatter_add_(-1, actions.unsqueeze(-1), torch.ones_like(probs[..., :1]))
            delta = torch.bmm(e, params[2].transpose(1, 2)) * (pre > 0).to(e.dtype)  # [S, n, H]
            x_sq = x.pow(2).sum(-1)
            x_sq = x_sq.expand(h.shape[:-1]) if x.ndim == 2 else x_sq
            return e.pow(2).sum(-1) * (h.pow(2).sum(-1) + 1) + delta.pow(2).sum(-1) * (x_sq + 1)


__all__ = ["MLP"]
