"""``fused_logprob``: per-token log-probabilities (and entropies) without the [N, V] logits.

Tokens are processed in chunks of ``chunk_size`` rows: z_c = h_c Wᵀ (fp32 statistics), then
logp = z_t − logsumexp(z) and H = −Σ p log p. Only hidden, weight, targets, the per-row lse
(and the returned entropy) are saved; backward recomputes z_c and applies

    dz = g_logp (onehot(t) − p) − g_H p ⊙ (log p + H),   dh_c = dz W,   dW += dzᵀ h_c,

so the extra memory is O(chunk_size × V). The softmax part runs in PyTorch (``"torch"``) or in a
Triton kernel (``"triton"``); the matmuls are PyTorch in both.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch
from jaxtyping import Float, Int
from torch import Tensor
from torch.autograd.function import once_differentiable

from sandbox.kernels.reference import torch_chunk_backward, torch_chunk_forward

BACKENDS: tuple[str, ...] = ("auto", "torch", "triton")
_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_FP32_OUT_MM: dict[tuple[str, torch.dtype], bool] = {}  # does mm(..., out_dtype=fp32) work here?


def fused_logprob(
    hidden: Float[Tensor, "N H"],
    lm_head_weight: Float[Tensor, "V H"],
    targets: Int[Tensor, " N"],
    *,
    chunk_size: int = 1024,
    return_entropy: bool = False,
    backend: str = "auto",
    ignore_index: int | None = -100,
) -> Float[Tensor, " N"] | tuple[Float[Tensor, " N"], Float[Tensor, " N"]]:
    """logp_i = log_softmax(h_i Wᵀ)[t_i] (and H_i = −Σ_v p_iv log p_iv), chunk by chunk.

    Returns fp32 (fp64 for fp64 inputs) ``logp`` or ``(logp, entropy)``; gradients reach
    ``hidden`` and ``lm_head_weight`` in their dtype. Rows with ``targets == ignore_index`` get
    logp = 0 and no logp gradient (their entropy is still computed). ``backend``: ``"torch"``,
    ``"triton"`` or ``"auto"`` (triton for CUDA tensors when importable, else torch).
    """
    n_rows, n_vocab = _check_inputs(hidden, lm_head_weight, targets, chunk_size, ignore_index)
    chunk_size = int(chunk_size)  # numpy integers are accepted
    if not isinstance(return_entropy, bool):
        raise ValueError(f"return_entropy must be a bool, got {type(return_entropy).__name__}")
    ops = _chunk_ops(_resolve_backend(backend, hidden))
    ignored = _ignored_rows(targets, ignore_index)
    out_of_range = ((targets < 0) | (targets >= n_vocab)) & ~ignored
    if n_rows and bool(out_of_range.any()):
        first = int(targets[out_of_range][0])
        allowed = "" if ignore_index is None else f" (or equal ignore_index={ignore_index})"
        raise ValueError(
            f"targets must lie in [0, {n_vocab}) where V={n_vocab} is lm_head_weight.shape[0]"
            f"{allowed}; got {int(out_of_range.sum())} out-of-range value(s), e.g. {first}"
        )
    marked = targets.masked_fill(ignored, -1).contiguous()
    return _FusedLogProb.apply(hidden, lm_head_weight, marked, chunk_size, return_entropy, ops)


ChunkOp = Callable[..., None]  # torch_chunk_forward / torch_chunk_backward and triton twins


class _FusedLogProb(torch.autograd.Function):
    """Chunked log-softmax gather (+ entropy); ``targets`` uses −1 for ignored rows."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_size, with_entropy, ops):
        forward_chunk, _ = ops
        n_rows, n_vocab = hidden.shape[0], weight.shape[0]
        stat = _stat_dtype(hidden.dtype)
        logp = hidden.new_empty(n_rows, dtype=stat)
        lse = hidden.new_empty(n_rows, dtype=stat)
        entropy = hidden.new_empty(n_rows, dtype=stat) if with_entropy else None
        logits = hidden.new_empty((min(chunk_size, n_rows), n_vocab), dtype=stat)
        for start in range(0, n_rows, chunk_size):
            rows = slice(start, min(start + chunk_size, n_rows))
            z = logits[: rows.stop - start]
            _logits_into(hidden[rows], weight, z)
            forward_chunk(z, targets[rows], logp[rows], lse[rows], _part(entropy, rows))
        ctx.save_for_backward(hidden, weight, targets, lse, entropy)
        ctx.chunk_size = chunk_size
        ctx.ops = ops
        ctx.set_materialize_grads(False)
        return (logp, entropy) if with_entropy else logp

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logp, grad_entropy=None):
        hidden, weight, targets, lse, entropy = ctx.saved_tensors
        need_hidden, need_weight = ctx.needs_input_grad[:2]
        nothing = (None,) * 4
        if (grad_logp is None and grad_entropy is None) or not (need_hidden or need_weight):
            return (None, None, *nothing)
        _, backward_chunk = ctx.ops
        chunk_size = ctx.chunk_size
        n_rows, n_vocab = hidden.shape[0], weight.shape[0]
        grad_logp = None if grad_logp is None else grad_logp.to(lse.dtype).contiguous()
        grad_entropy = None if grad_entropy is None else grad_entropy.to(lse.dtype).contiguous()
        logits = hidden.new_empty((min(chunk_size, n_rows), n_vocab), dtype=lse.dtype)
        # dz overwrites the logits buffer unless the matmuls need it in another dtype (bf16/fp16)
        dlogits = (
            logits if weight.dtype == lse.dtype else torch.empty_like(logits, dtype=weight.dtype)
        )
        grad_hidden = (
            torch.empty(hidden.shape, dtype=hidden.dtype, device=hidden.device)
            if need_hidden
            else None
        )
        grad_weight = (
            torch.zeros(weight.shape, dtype=weight.dtype, device=weight.device)
            if need_weight
            else None
        )
        for start in range(0, n_rows, chunk_size):
            rows = slice(start, min(start + chunk_size, n_rows))
            z, dz, h = logits[: rows.stop - start], dlogits[: rows.stop - start], hidden[rows]
            _logits_into(h, weight, z)
            backward_chunk(
                z,
                targets[rows],
                lse[rows],
                _part(entropy, rows),
                _part(grad_logp, rows),
                _part(grad_entropy, rows),
                dz,
            )
            if grad_hidden is not None:
                torch.mm(dz, weight, out=grad_hidden[rows])
            if grad_weight is not None:
                grad_weight.addmm_(dz.T, h)
        return (grad_hidden, grad_weight, *nothing)


def _part(x: Tensor | None, rows: slice) -> Tensor | None:
    return None if x is None else x[rows]


def _stat_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _logits_into(h: Tensor, weight: Tensor, out: Tensor) -> None:
    """out = h Wᵀ in ``out.dtype``; for bf16/fp16 inputs a fp32-output GEMM where supported."""
    if out.dtype == weight.dtype:
        torch.mm(h, weight.T, out=out)
        return
    key = (out.device.type, weight.dtype)
    if _FP32_OUT_MM.get(key, out.device.type == "cuda"):
        try:
            torch.mm(h, weight.T, out_dtype=out.dtype, out=out)
            _FP32_OUT_MM[key] = True
            return
        except (RuntimeError, NotImplementedError, TypeError):
            _FP32_OUT_MM[key] = False
    out.copy_(h @ weight.T)  # GEMM output in the input dtype, then upcast


def _chunk_ops(backend: str) -> tuple[ChunkOp, ChunkOp]:
    if backend == "torch":
        return torch_chunk_forward, torch_chunk_backward
    from sandbox.kernels import triton_logprob

    return triton_logprob.triton_chunk_forward, triton_logprob.triton_chunk_backward


def _resolve_backend(backend: str, hidden: Tensor) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        if hidden.device.type != "cuda" or hidden.dtype not in _TRITON_DTYPES:
            return "torch"
        from sandbox.kernels import triton_logprob

        return "triton" if triton_logprob.unavailable_reason(hidden.device) is None else "torch"
    if hidden.dtype not in _TRITON_DTYPES:
        raise ValueError(
            f"backend='triton' supports float32, bfloat16 and float16 inputs, got {hidden.dtype}; "
            "use backend='torch'"
        )
    from sandbox.kernels import triton_logprob

    reason = triton_logprob.unavailable_reason(hidden.device)
    if reason is not None:
        raise ValueError(reason)
    return "triton"


def _ignored_rows(targets: Tensor, ignore_index: int | None) -> Tensor:
    if ignore_index is None:
        return torch.zeros_like(targets, dtype=torch.bool)
    return targets == ignore_index


def _check_inputs(
    hidden: Tensor, weight: Tensor, targets: Tensor, chunk_size: int, ignore_index: int | None
) -> tuple[int, int]:
    """Raise ValueError naming the offending argument; return (N, V)."""
    for name, x in (("hidden", hidden), ("lm_head_weight", weight), ("targets", targets)):
        if not isinstance(x, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if hidden.ndim != 2:
        raise ValueError(f"hidden must have shape [N, H], got shape {tuple(hidden.shape)}")
    if hidden.dtype not in _FLOAT_DTYPES:
        raise ValueError(
            f"hidden must have dtype float32, bfloat16, float16 or float64, got {hidden.dtype}"
        )
    n_rows, width = hidden.shape
    if weight.ndim != 2 or weight.shape[1] != width or weight.shape[0] == 0:
        raise ValueError(
            f"lm_head_weight must have shape [V, H] with V >= 1 and H={width} matching hidden, "
            f"got shape {tuple(weight.shape)}"
        )
    if weight.dtype != hidden.dtype:
        raise ValueError(
            f"lm_head_weight must have dtype {hidden.dtype} matching hidden, got {weight.dtype}"
        )
    if tuple(targets.shape) != (n_rows,):
        raise ValueError(
            f"targets must have shape [N] with N={n_rows} matching hidden, got shape {tuple(targets.shape)}"
        )
    if targets.dtype != torch.int64:
        raise ValueError(f"targets must have dtype torch.int64, got {targets.dtype}")
    for name, x in (("lm_head_weight", weight), ("targets", targets)):
        if x.device != hidden.device:
            raise ValueError(
                f"{name} must be on the device of hidden ({hidden.device}), got {x.device}"
            )
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if ignore_index is not None and (
        isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral)
    ):
        raise ValueError(f"ignore_index must be an int or None, got {ignore_index!r}")
    return n_rows, weight.shape[0]
