"""Sampling completions from a causal LM with its KV cache, through the actor's sampling chain.

Prompts are left-padded; a row stops at EOS (kept, mask True); later positions hold ``pad_id`` with
mask False and log-prob 0. The recorded behaviour log-prob is that of the distribution actually
sampled from.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor, nn

from sandbox.core.sampling import IDENTITY, SamplingChain
from sandbox.core.tokens import token_mask
from sandbox.core.validation import check_range, check_tensor, on_host
from sandbox.policies.decode import Versions, decode, fresh


def positions(attention: Tensor) -> Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token."""
    return (attention.long().cumsum(-1) - 1).clamp(min=0)


def check_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> None:
    check_tensor("prompt_ids", prompt_ids, dtype="int", ndim=2)
    check_tensor("prompt_mask", prompt_mask, dtype="bool", ndim=2)
    if prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_mask must have shape {tuple(prompt_ids.shape)} (matching prompt_ids), "
                         f"got {tuple(prompt_mask.shape)}")
    if prompt_ids.shape[1] == 0 or on_host(prompt_mask) and not bool(prompt_mask[:, -1].all()):
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
    """Autoregressive sampling with the KV cache from left-padded prompts, through the one decode
    loop (``sandbox.policies.decode``): per step the last position's logits (in fp32, ``[1, B, V]``
    with a population axis of 1 as friction hooks expect) go through the actor's ``chain``
    (temperature, friction hooks, ε) and a ~ p by inverse CDF on one uniform
    of ``generator`` per row (drawn in fp64 on the generator's device); logp = log p(a). Stops when
    every row has emitted EOS or after ``max_new_tokens``.
    """
    check_prompts(prompt_ids, prompt_mask)
    check_range("max_new_tokens", max_new_tokens, low=1)
    out = decode(KVCachedSteps(prompt_ids, prompt_mask), Versions.single(model, max_new_tokens), chain,
                 fresh(generator, torch.float64), (1, prompt_ids.shape[0]), device=prompt_ids.device, eos=eos_id,
                 pad=pad_id)
    return Completions(tokens=out.actions[0], logp=out.logp[0], mask=token_mask(out.actions[0], eos_id))


class KVCachedSteps:
    """The decode loop's steps for a causal LM (the ``model`` a version decodes with): the
    prompts run once (prefill, at t = 0), then one token per step against the KV cache; logits
    ``[1, B, V]`` (a population axis of 1, as the chain's hooks expect) in fp32 (fp64 for an fp64
    model). The cache holds one version's keys and values."""

    def __init__(self, prompt_ids: Tensor, prompt_mask: Tensor) -> None:
        self.prompt_ids, self.attention = prompt_ids, prompt_mask.long()
        self.model: nn.Module | None = None

    def __call__(self, model: nn.Module, answered: Tensor) -> Tensor:
        if answered.shape[-1] == 0:
            self.model, self.cache = model, cache_keyword(model)
            out = model(input_ids=self.prompt_ids, attention_mask=self.attention, position_ids=positions(self.attention),
                        use_cache=True, logits_to_keep=1)
            self.next_position = positions(self.attention)[:, -1:] + 1
        elif model is not self.model:
            raise ValueError("a KV cache holds one version's keys and values: the model may not change within a rollout")
        else:
            self.attention = torch.cat([self.attention, self.attention.new_ones(answered.shape[1], 1)], -1)
            out = model(input_ids=answered[0, :, -1:], attention_mask=self.attention, position_ids=self.next_position,
                        **{self.cache: self.past}, use_cache=True)
            self.next_position = self.next_position + 1
        self.past = getattr(out, self.cache)
        logits = out.logits[:, -1]
        return logits.to(torch.promote_types(logits.dtype, torch.float32)).unsqueeze(0)


def cache_keyword(model) -> str:
    """The KV cache's name in the model's forward and output: ``cache`` from transformers 5.2x on,
    ``past_key_values`` before (passing the old name now warns at every decoding step)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


__all__ = ["Completions", "KVCachedSteps", "check_prompts", "positions", "sample_completions", "token_mask"]
