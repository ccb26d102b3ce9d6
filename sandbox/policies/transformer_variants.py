"""Named variants of the tiny transformer (``sandbox.policies.transformer``): MLP activation,
LayerNorm eps and initialiser.

``reference``: the model of the Delightful papers' code (google-deepmind/egg,
``egg/networks/transformers.py``) with Flax's default initialisers — ``nn.Embed`` N(0, 1/D),
``nn.Dense`` and ``nn.MultiHeadDotProductAttention`` kernels LeCun-normal (jax's
``variance_scaling(1, 'fan_in', 'truncated_normal')``), ``nn.LayerNorm`` scale 1, eps 1e-6 — and
a ReLU MLP. ``gpt2`` (Radford et al. 2019): GELU, eps 1e-5, N(0, σ²) weights with the residual
writes scaled by 1/√(2L).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

if TYPE_CHECKING:
    from sandbox.policies.transformer import Transformer

def _reference_init(model: Transformer, name: str, shape: tuple[int, ...], population: int,
                    generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """Flax defaults: embeddings N(0, 1/D); kernels [fan_in, fan_out] LeCun-normal (a standard normal
    truncated to ±2, times √(1/fan_in)/0.8796, the std of that truncated normal); LayerNorm scales 1."""
    if name.endswith(("ln1", "ln2")):
        return torch.ones(population, *shape, dtype=dtype)
    if name in ("tok_emb", "pos_emb"):
        return torch.randn(population, *shape, generator=generator, dtype=dtype) / math.sqrt(model.width)
    std = 1.0 / math.sqrt(shape[0]) / TRUNCATED_NORMAL_STD
    out = torch.empty(population, *shape, dtype=dtype)
    return torch.nn.init.trunc_normal_(out, 0.0, std, -2 * std, 2 * std, generator=generator)


def _gpt2_init(model: Transformer, name: str, shape: tuple[int, ...], population: int,
               generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """GPT-2: N(0, init_std²), the residual writes (w_o, w_down) N(0, (init_std/√(2L))²); gains 1."""
    if name.endswith(("ln1", "ln2")):
        return torch.ones(population, *shape, dtype=dtype)
    std = model.init_std / math.sqrt(2 * model.layers) if name.endswith(("w_o", "w_down")) else model.init_std
    return std * torch.randn(population, *shape, generator=generator, dtype=dtype)


@dataclass(frozen=True)
class Variant:
    """A named model variant: MLP activation, LayerNorm eps, initialiser ``(model, name, shape,
    population, generator, dtype) → [S, *shape]``."""

    activation: Callable[[Tensor], Tensor]
    ln_eps: float
    init: Callable[..., Tensor]


#: std of a standard normal truncated to [−2, 2] (jax.nn.initializers' constant)
TRUNCATED_NORMAL_STD = 0.87962566103423978
VARIANTS = {"reference": Variant(F.relu, 1e-6, _reference_init), "gpt2": Variant(F.gelu, 1e-5, _gpt2_init)}


__all__ = ["TRUNCATED_NORMAL_STD", "VARIANTS", "Variant"]
