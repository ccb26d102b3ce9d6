"""Input validation and backend selection of fused_logprob."""

import importlib
import sys

import pytest
import torch

import sandbox.kernels
from sandbox.kernels import fused_logprob
from sandbox.kernels.fused import _resolve_backend

CUDA = torch.cuda.is_available()


@pytest.fixture
def inputs(make_inputs):
    return make_inputs(6, 4, 10, torch.float32, device="cpu", requires_grad=False)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda h, w, t: (h[0], w, t), r"hidden must have shape \[N, H\]"),
        (lambda h, w, t: (h.long(), w, t), "hidden must have dtype"),
        (
            lambda h, w, t: (h, w[:, :3], t),
            r"lm_head_weight must have shape \[V, H\] .*H=4 matching hidden",
        ),
        (lambda h, w, t: (h, w[0], t), r"lm_head_weight must have shape \[V, H\]"),
        (lambda h, w, t: (h, w[:0], t), r"lm_head_weight must have shape \[V, H\] with V >= 1"),
        (
            lambda h, w, t: (h, w.double(), t),
            "lm_head_weight must have dtype torch.float32 matching hidden",
        ),
        (lambda h, w, t: (h, w, t[:5]), r"targets must have shape \[N\] with N=6"),
        (lambda h, w, t: (h, w, t.int()), "targets must have dtype torch.int64"),
        (lambda h, w, t: (h.numpy(), w, t), "hidden must be a torch.Tensor"),
    ],
)
def test_bad_shapes_and_dtypes(inputs, change, match):
    with pytest.raises(ValueError, match=match):
        fused_logprob(*change(*inputs), backend="torch")


@pytest.mark.parametrize(
    ("bad", "ignore_index", "match"),
    [
        (10, -100, r"targets must lie in \[0, 10\) .*or equal ignore_index=-100.*e\.g\. 10"),
        (-1, -100, r"targets must lie in \[0, 10\).*e\.g\. -1"),
        (
            -100,
            None,
            r"targets must lie in \[0, 10\) where V=10 is lm_head_weight.shape\[0\]; got 1",
        ),
    ],
)
def test_targets_out_of_range(inputs, bad, ignore_index, match):
    hidden, weight, targets = inputs
    targets = targets.clone()
    targets[2] = bad
    with pytest.raises(ValueError, match=match):
        fused_logprob(hidden, weight, targets, ignore_index=ignore_index, backend="torch")


@pytest.mark.parametrize("chunk_size", [0, -3, 1.5, True])
def test_chunk_size_must_be_positive_int(inputs, chunk_size):
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        fused_logprob(*inputs, chunk_size=chunk_size)


def test_other_arguments(inputs):
    with pytest.raises(ValueError, match=r"backend must be one of \('auto', 'torch', 'triton'\)"):
        fused_logprob(*inputs, backend="cuda")
    with pytest.raises(ValueError, match="return_entropy must be a bool"):
        fused_logprob(*inputs, return_entropy=1)
    with pytest.raises(ValueError, match="ignore_index must be an int or None"):
        fused_logprob(*inputs, ignore_index=-100.0)


@pytest.mark.skipif(not CUDA, reason="needs a second device")
def test_devices_must_match(inputs):
    hidden, weight, targets = inputs
    with pytest.raises(ValueError, match="lm_head_weight must be on the device of hidden"):
        fused_logprob(hidden, weight.cuda(), targets)


def test_auto_picks_torch_on_cpu(inputs):
    assert _resolve_backend("auto", inputs[0]) == "torch"
    assert _resolve_backend("auto", inputs[0].double()) == "torch"


@pytest.mark.skipif(not CUDA, reason="auto selects triton for CUDA tensors")
def test_auto_picks_triton_on_cuda(inputs):
    pytest.importorskip("triton")
    assert _resolve_backend("auto", inputs[0].cuda()) == "triton"


def test_triton_on_cpu_needs_the_interpreter(inputs, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="set TRITON_INTERPRET=1 .* or use backend='torch'"):
        fused_logprob(*inputs, backend="triton")


def test_triton_rejects_float64(inputs):
    hidden, weight, targets = inputs
    with pytest.raises(ValueError, match="backend='triton' supports float32, bfloat16 and float16"):
        fused_logprob(hidden.double(), weight.double(), targets, backend="triton")


def test_package_works_without_triton(inputs, monkeypatch):
    """With triton unimportable, the torch backend works and backend='triton' says why not."""
    module_name = "sandbox.kernels.triton_logprob"
    importlib.import_module(module_name)  # so that monkeypatch restores the real module afterwards
    monkeypatch.delitem(sys.modules, module_name)
    monkeypatch.delattr(sandbox.kernels, "triton_logprob")
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now raises ImportError
    monkeypatch.setitem(sys.modules, "triton.language", None)
    without = importlib.import_module(module_name)
    assert not without.HAS_TRITON
    assert fused_logprob(*inputs, backend="torch").shape == (6,)
    with pytest.raises(ValueError, match="needs the triton package"):
        fused_logprob(*inputs, backend="triton")
