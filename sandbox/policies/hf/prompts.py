"""The causal LM on a sequence problem's token prompts (``policy='causal_lm'`` on ``reverse_copy``,
``addition`` …): ``HFPolicy.from_spec`` of a ``TokenPromptSpec`` builds a tiny random ``transformers``
model over the problem's V tokens, and each ``Prompts`` row becomes an unpadded prompt of ids.

Every answer runs its ``answer_len`` tokens: the LM's EOS is the id V, outside its vocabulary, so it
is never drawn and nothing stops early; a problem that ends its answers with its own EOS token masks
the rest itself (``SequenceEnvironment.token_mask``), as it does for the transformer. One model per
run: the population is 1 (``one_model_per_run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sandbox.core.observations import Prompts, TextPrompts


@dataclass(frozen=True)
class PromptVocab:
    """What the LM policy asks of a tokenizer, for a vocabulary of ``vocab`` token ids: EOS = ``vocab``
    (never drawn), padding 0."""

    vocab: int

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def eos_id(self) -> int:
        return self.vocab

    @property
    def pad_id(self) -> int:
        return 0


def as_text(obs: Prompts) -> TextPrompts:
    """``Prompts`` (``tokens [1, G, P]``) as one unpadded prompt per row ``[B, P]``: row g·M + m
    answers prompt g, or the prompt ``groups`` names."""
    if obs.tokens.shape[0] != 1:
        raise ValueError(f"policy 'causal_lm' is one model per run: prompts of a population of 1, got "
                         f"{obs.tokens.shape[0]}")
    tokens = obs.tokens[0]
    ids = tokens[obs.groups[0]] if obs.groups is not None else tokens.repeat_interleave(obs.per_prompt, 0)
    return TextPrompts(ids, torch.ones_like(ids, dtype=torch.bool), obs.per_prompt)


__all__ = ["PromptVocab", "as_text"]
