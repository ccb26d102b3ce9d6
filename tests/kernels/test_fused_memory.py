"""The memory claim, checked structurally: fused_logprob never holds an [N, V] tensor.

Shapes are chosen so that N·V exceeds chunk_size·V, V·H and N·H: any tensor of N·V elements
would have to be the full logits (or their gradient). On CUDA the peak-memory target of the
issue (≤ 25% of naive at the largest V) is also measured directly.
"""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from sandbox.kernels import fused_logprob, naive_logprob

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
N, H, V, CHUNK = 64, 8, 300, 16


class LargestTensor(TorchDispatchMode):
    """Record the largest tensor (in bytes) any aten op returns while active.

    Bytes, not elements: the Triton interpreter moves arguments as raw uint8 storage.
    """

    def __init__(self):
        super().__init__()
        self.nbytes, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.nbytes > self.nbytes:
                self.nbytes, self.op = leaf.nbytes, func
        return out


def _loss(fn, hidden, weight, targets, **kwargs):
    logp, entropy = fn(hidden, weight, targets, return_entropy=True, **kwargs)
    return (logp * torch.linspace(-1, 1, N, device=DEVICE)).sum() + entropy.sum()


@pytest.fixture(params=["torch", "triton"])
def backend(request):
    if request.param == "triton":
        request.getfixturevalue("triton_ops")
    return request.param


def test_nothing_of_size_n_by_v_is_saved_for_backward(backend, make_inputs):
    hidden, weight, targets = make_inputs(N, H, V, torch.float32)
    saved: list[tuple[int, ...]] = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = _loss(fused_logprob, hidden, weight, targets, chunk_size=CHUNK, backend=backend)
    loss.backward()
    assert (N, H) in saved and (V, H) in saved
    largest = max(torch.Size(s).numel() for s in saved)
    assert largest < N * V, f"a tensor of shape {saved} is saved for backward"

    saved.clear()  # the same probe does see naive's [N, V] log-softmax
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _loss(naive_logprob, hidden, weight, targets)
    assert (N, V) in saved


def test_no_op_returns_an_n_by_v_tensor(backend, make_inputs):
    """Forward and backward: every intermediate is at most one fp32 [chunk_size, V] buffer."""
    hidden, weight, targets = make_inputs(N, H, V, torch.float32)
    limit = CHUNK * V * 4
    with LargestTensor() as probe:
        loss = _loss(fused_logprob, hidden, weight, targets, chunk_size=CHUNK, backend=backend)
        loss.backward()
    assert probe.nbytes <= limit, f"{probe.op} returned {probe.nbytes} bytes > {CHUNK}×{V}×4"

    with LargestTensor() as probe:
        _loss(naive_logprob, hidden, weight, targets).backward()
    assert probe.nbytes >= N * V * 4


@pytest.mark.skipif(not CUDA, reason="peak-memory target is measured with the CUDA allocator")
@pytest.mark.parametrize("vocab", [32000, 152064])
def test_cuda_peak_memory_quarter_of_naive(backend, vocab, make_inputs):
    hidden, weight, targets = make_inputs(16384, 4096, vocab, torch.bfloat16)

    def peak(fn, **kwargs):
        h = hidden.detach().requires_grad_()
        w = weight.detach().requires_grad_()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        logp = fn(h, w, targets, **kwargs)
        torch.autograd.grad(logp.float().sum(), (h, w))
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    naive = peak(naive_logprob)
    fused = peak(fused_logprob, backend=backend)
    assert fused <= 0.25 * naive, (
        f"fused peak {fused / 2**30:.2f} GiB > 25% of naive {naive / 2**30:.2f} GiB"
    )
