"""Triton kernels for the softmax part of one [C, V] logits chunk (the "triton" backend).

One program per row, sweeping V in blocks of ``BLOCK_V`` with an online max/sum:

    forward:  lse = m + log s,  logp = z_t − lse,  H = log s − Σ_v e^{z_v−m}(z_v−m) / s,
    backward: dz = g_logp (onehot(t) − p) − g_H p ⊙ (log p + H),  p = e^{z−lse},

where m is the running max and s = Σ_v e^{z_v−m}; statistics are fp32. The backward writes dz
over the logits buffer in place when the dtypes agree. The matmuls stay in PyTorch
(``sandbox.kernels.fused``). A target of −1 marks an ignored row (logp = 0, no logp gradient).

Triton decides at import whether its kernels are interpreted: on CPU tensors they only run
when ``TRITON_INTERPRET=1`` was set before this module was imported.
"""

from __future__ import annotations

import contextlib
import os

import torch
from jaxtyping import Float, Int
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # the package must import without triton
    triton = None
    tl = None


def _interpret_requested() -> bool:
    knobs = getattr(triton, "knobs", None)  # triton >= 3.3 reads TRITON_INTERPRET through knobs
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


HAS_TRITON = triton is not None
# triton.jit picks the interpreter when the kernels below are defined, i.e. at this import
INTERPRETED = HAS_TRITON and _interpret_requested()
MAX_BLOCK_V = 4096  # columns per block; tests lower it to exercise the multi-block path


def unavailable_reason(device: torch.device) -> str | None:
    """Why the kernels cannot run on ``device`` right now, or None if they can."""
    if not HAS_TRITON:
        return "backend='triton' needs the triton package, which is not importable; use backend='torch'"
    if device.type != "cuda" and not (INTERPRETED and _interpret_requested()):
        return (
            f"backend='triton' on {device.type} tensors runs only in the Triton interpreter: set "
            "TRITON_INTERPRET=1 before sandbox.kernels first uses triton (before the first "
            "backend='triton' call), or use backend='torch'"
        )
    return None


def _launch_config(n_cols: int) -> tuple[int, int]:
    block = min(MAX_BLOCK_V, triton.next_power_of_2(n_cols))
    return block, (8 if block >= 2048 else 4)


def _on(device: torch.device):
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def triton_chunk_forward(
    logits: Float[Tensor, "C V"],
    targets: Int[Tensor, " C"],
    logp: Float[Tensor, " C"],
    lse: Float[Tensor, " C"],
    entropy: Float[Tensor, " C"] | None,
) -> None:
    """Write lse, logp = z_t − lse and (if ``entropy`` is given) H for each row of the chunk."""
    rows, n_cols = logits.shape
    if rows == 0:
        return
    block, warps = _launch_config(n_cols)
    with _on(logits.device):
        _forward_kernel[(rows,)](
            logits,
            logits.stride(0),
            targets,
            logp,
            lse,
            lse if entropy is None else entropy,
            n_cols,
            BLOCK_V=block,
            WITH_ENTROPY=entropy is not None,
            num_warps=warps,
        )


def triton_chunk_backward(
    logits: Float[Tensor, "C V"],
    targets: Int[Tensor, " C"],
    lse: Float[Tensor, " C"],
    entropy: Float[Tensor, " C"] | None,
    grad_logp: Float[Tensor, " C"] | None,
    grad_entropy: Float[Tensor, " C"] | None,
    out: Float[Tensor, "C V"],
) -> None:
    """Write dz = g_logp (onehot(t) − p) − g_H p ⊙ (log p + H) into ``out`` (may be ``logits``)."""
    rows, n_cols = logits.shape
    if rows == 0:
        return
    block, warps = _launch_config(n_cols)
    with_entropy = grad_entropy is not None and entropy is not None
    with _on(logits.device):
        _backward_kernel[(rows,)](
            logits,
            logits.stride(0),
            out,
            out.stride(0),
            targets,
            lse,
            entropy if with_entropy else lse,
            lse if grad_logp is None else grad_logp,
            grad_entropy if with_entropy else lse,
            n_cols,
            BLOCK_V=block,
            WITH_GRAD_LOGP=grad_logp is not None,
            WITH_ENTROPY=with_entropy,
            num_warps=warps,
        )


if HAS_TRITON:

    @triton.jit
    def _forward_kernel(
        z_ptr,
        z_stride,
        tgt_ptr,
        logp_ptr,
        lse_ptr,
        ent_ptr,
        n_cols,
        BLOCK_V: tl.constexpr,
        WITH_ENTROPY: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        z_row = z_ptr + row * z_stride
        cols = tl.arange(0, BLOCK_V)
        m = tl.full([], float("-inf"), tl.float32)  # running max
        s = tl.zeros([], tl.float32)  # Σ e^{z−m}
        t = tl.zeros([], tl.float32)  # Σ e^{z−m} (z−m)
        for start in range(0, n_cols, BLOCK_V):
            offs = start + cols
            mask = offs < n_cols
            z = tl.load(z_row + offs, mask=mask, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(z, 0))
            alpha = tl.exp(m - m_new)
            e = tl.exp(z - m_new)
            if WITH_ENTROPY:
                # rebase Σ e^{z−m}(z−m) onto the new max; s = 0 (and m = −inf) before the first block
                shift = tl.where(s > 0, m - m_new, 0.0) * s
                t = alpha * (t + shift) + tl.sum(e * tl.where(mask, z - m_new, 0.0), 0)
            s = s * alpha + tl.sum(e, 0)
            m = m_new
        log_s = tl.log(s)
        row_lse = m + log_s
        tgt = tl.load(tgt_ptr + row)
        valid = tgt >= 0
        z_t = tl.load(z_row + tl.where(valid, tgt, 0), mask=valid, other=0.0).to(tl.float32)
        tl.store(lse_ptr + row, row_lse)
        tl.store(logp_ptr + row, tl.where(valid, z_t - row_lse, 0.0))
        if WITH_ENTROPY:
            tl.store(ent_ptr + row, log_s - t / s)

    @triton.jit
    def _backward_kernel(
        z_ptr,
        z_stride,
        dz_ptr,
        dz_stride,
        tgt_ptr,
        lse_ptr,
        ent_ptr,
        glp_ptr,
        gent_ptr,
        n_cols,
        BLOCK_V: tl.constexpr,
        WITH_GRAD_LOGP: tl.constexpr,
        WITH_ENTROPY: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        z_row = z_ptr + row * z_stride
        dz_row = dz_ptr + row * dz_stride
        cols = tl.arange(0, BLOCK_V)
        row_lse = tl.load(lse_ptr + row)
        tgt = tl.load(tgt_ptr + row)
        g_lp = tl.zeros([], tl.float32)
        if WITH_GRAD_LOGP:
            g_lp = tl.where(tgt >= 0, tl.load(glp_ptr + row).to(tl.float32), 0.0)
        g_h = tl.zeros([], tl.float32)
        ent = tl.zeros([], tl.float32)
        if WITH_ENTROPY:
            g_h = tl.load(gent_ptr + row).to(tl.float32)
            ent = tl.load(ent_ptr + row)
        for start in range(0, n_cols, BLOCK_V):
            offs = start + cols
            mask = offs < n_cols
            logq = tl.load(z_row + offs, mask=mask, other=0.0).to(tl.float32) - row_lse
            p = tl.exp(logq)
            if WITH_ENTROPY:
                dz = tl.where(offs == tgt, g_lp, 0.0) - p * (g_lp + g_h * (logq + ent))
            else:
                dz = tl.where(offs == tgt, g_lp, 0.0) - p * g_lp
            tl.store(dz_row + offs, dz.to(dz_ptr.dtype.element_ty), mask=mask)
