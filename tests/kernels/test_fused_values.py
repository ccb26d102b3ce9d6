"""fused_logprob against naive_logprob: values and gradients (to hidden and weight), both backends.

Errors are measured as max |actual − reference| / max |reference| per tensor (logp, entropy,
d hidden, d weight), with a random upstream gradient on both logp and entropy.

Tolerances:
  float32   1e-5, against naive_logprob in float32 (the two differ only by rounding order).
  float64   1e-10 (hypothesis over shapes and chunk sizes: the chunked algorithm is exact).
  bfloat16  2**-5, against a float64 reference built from the same bf16 inputs. bf16 keeps 8
            significant bits (unit roundoff 2**-9); the logits GEMM output (on CPU), the dlogits
            fed to the backward GEMMs and the per-chunk dW partial sums are rounded to bf16, and
            naive bf16 errs by as much: fused must also be within 2× naive's error + 2**-8.

Without CUDA the Triton cases run in the interpreter on tiny shapes; with CUDA the same tests also
run at full size (N=4096, H=4096, V up to 152064).
"""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox.kernels import fused_logprob, naive_logprob

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
TOL = {torch.float32: 1e-5, torch.bfloat16: 2**-5, torch.float64: 1e-10}

# (N, H, V, chunk_size)
CASES = [
    (1, 8, 7, 4),  # a single token
    (37, 16, 300, 8),  # N not a multiple of chunk_size, V not a multiple of the block
    (64, 32, 257, 64),  # exactly one chunk, V = 2**8 + 1
    (20, 4, 50, 1000),  # chunk_size > N
    (48, 16, 128, 16),  # everything divides
]
if CUDA:
    CASES += [(4096 + 3, 4096, 32000, 1024), (4096, 4096, 152064, 1024)]
CPU_BLOCK = 64  # Triton block on CPU: V = 257 and 300 take several blocks and a ragged tail


def _run(fn, hidden, weight, targets, grad_logp, grad_entropy, **kwargs):
    """(logp, entropy, d hidden, d weight) for loss Σ g_logp·logp + Σ g_H·H."""
    h = hidden.detach().clone().requires_grad_()
    w = weight.detach().clone().requires_grad_()
    logp, entropy = fn(h, w, targets, return_entropy=True, **kwargs)
    loss = (logp.double() * grad_logp).sum() + (entropy.double() * grad_entropy).sum()
    dh, dw = torch.autograd.grad(loss, (h, w))
    return logp, entropy, dh, dw


def _errors(actual, expected):
    return [
        ((a.double() - e.double()).abs().max() / e.double().abs().max().clamp_min(1e-300)).item()
        for a, e in zip(actual, expected)
    ]


def _assert_within(actual, expected, tol, label):
    names = ("logp", "entropy", "d hidden", "d weight")
    for name, err in zip(names, _errors(actual, expected)):
        assert err <= tol, f"{label}: {name} error {err:.3g} > {tol:.3g} (relative to max |ref|)"


def _upstream(n, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=gen, dtype=torch.float64).to(DEVICE) for _ in range(2))


@pytest.fixture(params=["torch", "triton"])
def backend(request, monkeypatch):
    if request.param == "triton":
        ops = request.getfixturevalue("triton_ops")
        if not CUDA:
            monkeypatch.setattr(ops, "MAX_BLOCK_V", CPU_BLOCK)
    return request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}-H{}-V{}-C{}".format(*c))
def test_matches_naive(backend, dtype, case, make_inputs):
    n, h, v, chunk = case
    hidden, weight, targets = make_inputs(n, h, v, dtype)
    g_lp, g_h = _upstream(n)
    fused = _run(
        fused_logprob, hidden, weight, targets, g_lp, g_h, chunk_size=chunk, backend=backend
    )
    assert fused[0].dtype == fused[1].dtype == torch.float32
    assert fused[2].dtype == fused[3].dtype == dtype
    if dtype == torch.float32:
        naive = _run(naive_logprob, hidden, weight, targets, g_lp, g_h)
        _assert_within(fused, naive, TOL[dtype], f"{backend} fp32 vs naive fp32")
        return
    ref_dtype = torch.float64 if n * v <= 2**26 else torch.float32
    ref = _run(naive_logprob, hidden.to(ref_dtype), weight.to(ref_dtype), targets, g_lp, g_h)
    naive = _run(naive_logprob, hidden, weight, targets, g_lp, g_h)
    _assert_within(fused, ref, TOL[dtype], f"{backend} bf16 vs fp64")
    for name, e_fused, e_naive in zip(
        ("logp", "entropy", "d hidden", "d weight"), _errors(fused, ref), _errors(naive, ref)
    ):
        assert e_fused <= 2 * e_naive + 2**-8, (
            f"{name}: fused bf16 {e_fused:.3g} vs naive {e_naive:.3g}"
        )


@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: "N{}-H{}-V{}-C{}".format(*c))
def test_logp_only(backend, case, make_inputs):
    n, h, v, chunk = case
    hidden, weight, targets = make_inputs(n, h, v, torch.float32)
    (g_lp, _) = _upstream(n)
    logp = fused_logprob(hidden, weight, targets, chunk_size=chunk, backend=backend)
    assert isinstance(logp, torch.Tensor) and logp.shape == (n,)
    dh, dw = torch.autograd.grad((logp.double() * g_lp).sum(), (hidden, weight))
    h2, w2 = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
    ref = naive_logprob(h2, w2, targets)
    rh, rw = torch.autograd.grad((ref.double() * g_lp).sum(), (h2, w2))
    _assert_within((logp, logp, dh, dw), (ref, ref, rh, rw), 1e-5, backend)


@pytest.mark.parametrize("used", ["logp", "entropy"])
def test_gradient_through_one_output(backend, used, make_inputs):
    """Only one of the two returned outputs reaches the loss; the other gets no gradient."""
    hidden, weight, targets = make_inputs(37, 16, 300, torch.float32)
    logp, entropy = fused_logprob(
        hidden, weight, targets, chunk_size=8, return_entropy=True, backend=backend
    )
    out = logp if used == "logp" else entropy
    grads = torch.autograd.grad(out.sum(), (hidden, weight))
    h2, w2 = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
    ref_lp, ref_h = naive_logprob(h2, w2, targets, return_entropy=True)
    ref = torch.autograd.grad((ref_lp if used == "logp" else ref_h).sum(), (h2, w2))
    for g, r in zip(grads, ref):
        assert ((g - r).abs().max() / r.abs().max()).item() <= 1e-5


def test_frozen_inputs_get_no_gradient(backend, make_inputs):
    hidden, weight, targets = make_inputs(37, 16, 300, torch.float32)
    ref_dh, ref_dw = torch.autograd.grad(
        naive_logprob(hidden, weight, targets).sum(), (hidden, weight)
    )
    frozen_w = weight.detach()
    (dh,) = torch.autograd.grad(
        fused_logprob(hidden, frozen_w, targets, chunk_size=8, backend=backend).sum(), hidden
    )
    frozen_h = hidden.detach()
    (dw,) = torch.autograd.grad(
        fused_logprob(frozen_h, weight, targets, chunk_size=8, backend=backend).sum(), weight
    )
    torch.testing.assert_close(dh, ref_dh, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dw, ref_dw, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        out = fused_logprob(hidden, weight, targets, chunk_size=8, backend=backend)
    assert not out.requires_grad


def test_ignore_index(backend, make_inputs):
    """Ignored rows: logp = 0 and no logp gradient; their entropy is still the row's entropy."""
    hidden, weight, targets = make_inputs(37, 16, 300, torch.float32)
    targets = targets.clone()
    targets[[0, 5, 36]] = -100
    g_lp, g_h = _upstream(37)
    fused = _run(fused_logprob, hidden, weight, targets, g_lp, g_h, chunk_size=8, backend=backend)
    assert bool((fused[0][[0, 5, 36]] == 0).all())
    naive = _run(naive_logprob, hidden, weight, targets, g_lp, g_h)
    _assert_within(fused, naive, 1e-5, backend)
    kept = targets != -100
    dh = torch.autograd.grad(
        fused_logprob(hidden, weight, targets, chunk_size=8, backend=backend).sum(), hidden
    )[0]
    assert bool((dh[~kept] == 0).all()) and bool((dh[kept] != 0).any())


def test_empty_batch(backend, make_inputs):
    hidden, weight, targets = make_inputs(0, 8, 50, torch.float32)
    logp, entropy = fused_logprob(hidden, weight, targets, return_entropy=True, backend=backend)
    assert logp.shape == entropy.shape == (0,)
    dh, dw = torch.autograd.grad(logp.sum() + entropy.sum(), (hidden, weight))
    assert dh.shape == (0, 8) and bool((dw == 0).all())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    h=st.integers(1, 12),
    v=st.integers(1, 90),
    chunk=st.integers(1, 50),
    seed=st.integers(0, 2**16),
    ignore_some=st.booleans(),
)
def test_torch_backend_exact_in_fp64(n, h, v, chunk, seed, ignore_some):
    hidden, weight, targets = _cpu_inputs(n, h, v, torch.float64, seed)
    if ignore_some:
        targets[::3] = -100
    g_lp, g_h = (
        torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + k))
        for k in (1, 2)
    )
    fused = _run(
        fused_logprob, hidden, weight, targets, g_lp, g_h, chunk_size=chunk, backend="torch"
    )
    naive = _run(naive_logprob, hidden, weight, targets, g_lp, g_h)
    _assert_within(fused, naive, TOL[torch.float64], f"n={n} h={h} v={v} chunk={chunk}")


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(1, 24),
    h=st.integers(1, 8),
    v=st.integers(1, 200),
    chunk=st.integers(1, 32),
    block=st.sampled_from([16, 32, 128]),
    seed=st.integers(0, 2**16),
)
def test_triton_matches_torch_reference(triton_ops, n, h, v, chunk, block, seed):
    hidden, weight, targets = _cpu_inputs(n, h, v, torch.float32, seed)
    hidden, weight, targets = hidden.to(DEVICE), weight.to(DEVICE), targets.to(DEVICE)
    g_lp, g_h = _upstream(n, seed)
    original = triton_ops.MAX_BLOCK_V
    try:
        triton_ops.MAX_BLOCK_V = block
        fused = _run(
            fused_logprob, hidden, weight, targets, g_lp, g_h, chunk_size=chunk, backend="triton"
        )
    finally:
        triton_ops.MAX_BLOCK_V = original
    ref = _run(fused_logprob, hidden, weight, targets, g_lp, g_h, chunk_size=chunk, backend="torch")
    _assert_within(fused, ref, 1e-5, f"n={n} h={h} v={v} chunk={chunk} block={block}")


def test_gradcheck_fp64():
    hidden, weight, targets = _cpu_inputs(7, 3, 11, torch.float64, 0)

    def both(h, w):
        return fused_logprob(h, w, targets, chunk_size=3, return_entropy=True, backend="torch")

    assert torch.autograd.gradcheck(both, (hidden, weight))


def _cpu_inputs(n, h, v, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=gen, dtype=dtype, requires_grad=True)
    weight = (3 * torch.randn(v, h, generator=gen, dtype=dtype) / h**0.5).requires_grad_()
    return hidden, weight, torch.randint(0, v, (n,), generator=gen)
