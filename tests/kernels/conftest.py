"""Shared fixtures for the fused log-prob kernels.

Without CUDA the Triton kernels only run in the interpreter, which Triton selects when the kernels
are defined, so ``TRITON_INTERPRET=1`` must be set before anything imports them: here.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# define the kernels now, under that setting, whatever test first reaches for them
import sandbox.kernels.triton_logprob  # noqa: E402, F401  (imports even without triton)

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")


@pytest.fixture
def triton_ops():
    """The triton_logprob module, or skip when Triton cannot run on this machine."""
    pytest.importorskip("triton")
    from sandbox.kernels import triton_logprob

    reason = triton_logprob.unavailable_reason(DEVICE)
    if reason is not None:
        pytest.skip(reason)
    return triton_logprob


def _make_inputs(n, h, v, dtype, *, seed=0, device=DEVICE, requires_grad=True):
    """hidden ~ N(0, 1), W ~ N(0, 9/H) so logits have standard deviation ≈ 3; random targets."""
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=gen).to(device=device, dtype=dtype)
    weight = (3.0 * torch.randn(v, h, generator=gen) / h**0.5).to(device=device, dtype=dtype)
    targets = torch.randint(0, v, (n,), generator=gen).to(device)
    return hidden.requires_grad_(requires_grad), weight.requires_grad_(requires_grad), targets


@pytest.fixture
def make_inputs():
    """``make_inputs(n, h, v, dtype, seed=0) -> (hidden, weight, targets)`` (leaf tensors)."""
    return _make_inputs
