"""Sampling completions from a causal LM with its KV cache, through the actor's sampling chain.

Prompts are left-padded; a row stops at EOS (kept, mask True); later positions hold ``pad_id`` with
mask False and log-prob 0. The recorded behaviour log-prob is that of the distribution actually
sampled from.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from sandbox.core.sampling import IDENTITY, SamplingChain, draw
from sandbox.core.validation import check_range, check_tensor


def token_mask(actions: Int[Tensor, "*B T"], eos_id: int) -> Bool[Tensor, "*B T"]:
    """Generated tokens up to and including the first EOS (True); the padding after it (False)."""
    eos = (actions == eos_id).long()
    before = eos.cumsum(-1) - eos  # EOS tokens strictly before position t
    return before == 0


def sample_rows(probs: Float[Tensor, "B V"], generator: torch.Generator) -> Int[Tensor, " B"]:
    """One draw per row by inverse CDF on one uniform per row from ``generator`` (drawn on the
    generator's device, then moved to the rows'), so the same seed gives the same tokens anywhere."""
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=torch.float64).to(probs.device, probs.dtype)
    return draw(probs, u)


def positions(attention: Tensor) -> Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token."""
    return (attention.long().cumsum(-1) - 1).clamp(min=0)


def check_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> None:
    check_tensor("prompt_ids", prompt_ids, dtype="int", ndim=2)
    check_tensor("prompt_mask", prompt_mask, dtype="bool", ndim=2)
    if prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_mask must have shape {tuple(prompt_ids.shape)} (matching prompt_ids), "
                         f"got {tuple(prompt_mask.shape)}")
    if prompt_ids.shape[1] == 0 or not bool(prompt_mask[:, -1].all()):
        raise ValueError("prompts must be left-padded and non-empty: prompt_mask[:, -1] must be all True")


@dataclass(frozen=True)
class Completions:
    """Sampled tokens ``[B, T]`` (``pad_id`` after EOS), their behaviour log-probs (fp32, 0 where
    masked) and the mask of generated tokens."""

    tokens: Tensor
    logp: Tensor
    mask: Tensor


@torch.no_grad()
def sample_completions(
    model: nn.Module,
    prompt_ids: Int[Tensor, "B P"],
    prompt_mask: Bool[Tensor, "B P"],
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator,
    chain: SamplingChain = IDENTITY,
) -> Completions:
    """Autoregressive sampling with the KV cache (``cache_keyword``) from left-padded prompts.

    Per step: the last position's logits (in fp32) go through the actor's ``chain``
    (``sandbox.core.sampling``: temperature, friction hooks, ε) and a ~ p by inverse CDF on one
    uniform of ``generator`` per row; logp = log p(a). Stops when every row has emitted EOS or
    after ``max_new_tokens``.
    """
    check_prompts(prompt_ids, prompt_mask)
    check_range("max_new_tokens", max_new_tokens, low=1)
    B, device = prompt_ids.shape[0], prompt_ids.device
    attention = prompt_mask.long()
    out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions(attention),
                use_cache=True, logits_to_keep=1)
    cache = cache_keyword(model)
    next_position = positions(attention)[:, -1:] + 1
    stat = torch.promote_types(out.logits.dtype, torch.float32)  # fp32 (fp64 for an fp64 model)
    tokens = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logp = torch.zeros(B, max_new_tokens, dtype=stat, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    for t in range(max_new_tokens):
        log_probs, probs = chain.distribution(out.logits[:, -1].to(stat))
        token = sample_rows(probs, generator)
        lp = log_probs.gather(-1, token.unsqueeze(-1)).squeeze(-1)
        tokens[:, t] = torch.where(done, pad_id, token)
        logp[:, t] = torch.where(done, 0.0, lp)
        done = done | (token == eos_id)
        if t + 1 == max_new_tokens or bool(done.all()):
            break
        attention = torch.cat([attention, attention.new_ones(B, 1)], -1)
        out = model(input_ids=tokens[:, t : t + 1], attention_mask=attention, position_ids=next_position,
                    **{cache: getattr(out, cache)}, use_cache=True)
        next_position = next_position + 1
    return Completions(tokens=tokens, logp=logp, mask=token_mask(tokens, eos_id))


def cache_keyword(model) -> str:
    """The KV cache's name in the model's forward and output: ``cache`` from transformers 5.2x on,
    ``past_key_values`` before (passing the old name now warns at every decoding step)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


__all__ = ["Completions", "check_prompts", "positions", "sample_completions", "sample_rows", "token_mask"]
