"""Plain-PyTorch log-probabilities of taken tokens: the naive baseline and the per-chunk reference.

With logits z = h Wᵀ, p = softmax(z) and lse = log Σ_v exp z_v:

    logp = z_t − lse,    H = −Σ_v p_v log p_v,
    ∂logp/∂z = onehot(t) − p,    ∂H/∂z = −p ⊙ (log p + H).

``naive_logprob`` materialises all [N, V] logits. ``torch_chunk_forward`` and
``torch_chunk_backward`` work on one [C, V] chunk of logits that the caller owns and may be
overwritten; ``sandbox.kernels.fused`` drives them chunk by chunk (the "torch" backend).
A target of −1 marks an ignored row: logp = 0 and no logp gradient.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def naive_logprob(
    hidden: Float[Tensor, "N H"],
    weight: Float[Tensor, "V H"],
    targets: Int[Tensor, " N"],
    return_entropy: bool = False,
    *,
    ignore_index: int | None = -100,
) -> Float[Tensor, " N"] | tuple[Float[Tensor, " N"], Float[Tensor, " N"]]:
    """logp_i = log_softmax(h_i Wᵀ)[t_i] (and H_i = −Σ_v p_iv log p_iv), all logits at once.

    Computed in the inputs' dtype; rows whose target equals ``ignore_index`` get logp = 0.
    """
    logq = torch.log_softmax(hidden @ weight.T, dim=-1)
    ignored = _ignored(targets, ignore_index)
    safe = targets.masked_fill(ignored, 0)
    logp = logq.gather(-1, safe.unsqueeze(-1)).squeeze(-1).masked_fill(ignored, 0.0)
    if not return_entropy:
        return logp
    entropy = -(logq.exp() * logq).sum(-1)
    return logp, entropy


def _ignored(targets: Tensor, ignore_index: int | None) -> Tensor:
    if ignore_index is None:
        return torch.zeros_like(targets, dtype=torch.bool)
    return targets == ignore_index


def torch_chunk_forward(
    logits: Float[Tensor, "C V"],
    targets: Int[Tensor, " C"],
    logp: Float[Tensor, " C"],
    lse: Float[Tensor, " C"],
    entropy: Float[Tensor, " C"] | None,
) -> None:
    """Write lse = log Σ exp z, logp = z_t − lse and H = −Σ p log p for one chunk (in place).

    ``logits`` is scratch: it is overwritten with log p when the entropy is asked for.
    """
    valid = targets >= 0
    row_lse = torch.logsumexp(logits, dim=-1)
    z_t = logits.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    lse.copy_(row_lse)
    logp.copy_(torch.where(valid, z_t - row_lse, 0.0))
    if entropy is not None:
        logq = logits.sub_(row_lse.unsqueeze(-1))
        entropy.copy_(-(logq.exp().mul_(logq)).sum(-1))


def torch_chunk_backward(
    logits: Float[Tensor, "C V"],
    targets: Int[Tensor, " C"],
    lse: Float[Tensor, " C"],
    entropy: Float[Tensor, " C"] | None,
    grad_logp: Float[Tensor, " C"] | None,
    grad_entropy: Float[Tensor, " C"] | None,
    out: Float[Tensor, "C V"],
) -> None:
    """Write dz = g_logp (onehot(t) − p) − g_H p ⊙ (log p + H) into ``out`` (may alias ``logits``).

    ``logits`` is scratch and is overwritten; only the entropy term needs one more [C, V] buffer.
    """
    logq = logits.sub_(lse.unsqueeze(-1))  # log p
    g_lp = None if grad_logp is None else torch.where(targets >= 0, grad_logp, 0.0).to(logits.dtype)
    if grad_entropy is not None and entropy is not None:
        p = logq.exp()
        coef = logq.add_(entropy.unsqueeze(-1)).mul_(grad_entropy.to(logits.dtype).unsqueeze(-1))
        if g_lp is not None:
            coef.add_(g_lp.unsqueeze(-1))
        grad = p.mul_(coef).neg_()
    elif g_lp is not None:
        grad = logq.exp_().mul_(-g_lp.unsqueeze(-1))
    else:
        grad = logq.zero_()
    if g_lp is not None:
        grad.scatter_add_(-1, targets.clamp_min(0).unsqueeze(-1), g_lp.unsqueeze(-1))
    if grad is not out:
        out.copy_(grad)
