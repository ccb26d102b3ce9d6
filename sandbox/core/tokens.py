"""Token conventions shared by the text environments and the causal-LM policies (below both, so
neither imports the other): the valid-token mask of EOS-ended completions and the character an id
outside a vocabulary decodes to."""

from __future__ import annotations

from torch import Tensor

REPLACEMENT = "\ufffd"  # how an id outside the vocabulary decodes with errors='replace'


def token_mask(actions: Tensor, eos_id: int) -> Tensor:
    """Generated tokens ``[*B, T]`` up to and including the first EOS (True); the padding after it (False)."""
    eos = (actions == eos_id).long()
    before = eos.cumsum(-1) - eos  # EOS tokens strictly before position t
    return before == 0


__all__ = ["REPLACEMENT", "token_mask"]
