"""What an environment shows a policy — below both sides of that seam, so that no policy imports
an environment and no environment a policy.

Two things per kind of observation:

* the **observation** a policy's ``sample``/``score`` receive (``Contexts``, ``Prompts``,
  ``TextPrompts``: ``sandbox.envs.base.Environment.observe``);
* its **spec** — the sizes a policy is built from, fixed for a run (``ContextIdSpec``,
  ``ContextVectorSpec``, ``TokenPromptSpec``, ``TextPromptSpec``): an environment says what it shows
  (``Environment.spec``), a policy family what it reads (``Policy.reads``, a tuple of spec classes)
  and how it is built from one (``Policy.from_spec``). A family asked for on an environment whose
  spec it does not read is refused in one line naming both (``check_reads``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor


# ----------------------------------------------------------------------------- observations
@dataclass(frozen=True)
class Contexts:
    """What a categorical policy sees: context ids ``ids [S, R]``, ``features(ids, dtype)`` (the ids
    themselves, or pixels), ``run`` (rows come in runs of ``run`` identical contexts, when they do)
    and whether every action of each context is ``enumerated`` (``run`` = K rows per context)."""

    ids: Tensor
    features: Callable[[Tensor, torch.dtype], Tensor]
    run: int = 1
    enumerated: bool = False


@dataclass(frozen=True)
class Prompts:
    """What a sequence policy sees: prompts ``tokens [S, G, P]``, each answered by ``per_prompt``
    rows (row g·M + m answers prompt g) of ``answer_len`` tokens — or fewer, ended by the token
    ``eos`` when the problem has one (later positions are padding). ``groups [S, B]``, when given,
    names the prompt each row answers instead (the rows a screened objective re-scores)."""

    tokens: Tensor
    per_prompt: int
    answer_len: int
    eos: int | None = None
    groups: Tensor | None = None


@dataclass(frozen=True)
class TextPrompts:
    """What a causal LM sees: left-padded prompt ids ``ids [B, P]`` with their ``mask``, one row per
    completion (``per_prompt`` rows of one problem in a row)."""

    ids: Tensor
    mask: Tensor
    per_prompt: int = 1


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class ObservationSpec:
    """The sizes of what an environment shows; ``kind`` names it in messages. ``policy_fields()``
    are the keywords a policy family is built with by default (``Policy.from_spec``)."""

    kind: ClassVar[str] = "observations"

    def policy_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ContextIdSpec(ObservationSpec):
    """Contexts from a finite table: ``features`` are the ids ``[S, n]`` in ``[0, n_contexts)``, one of
    ``n_actions`` actions each (the bandits)."""

    kind: ClassVar[str] = "context ids"
    n_contexts: int
    n_actions: int
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class ContextVectorSpec(ObservationSpec):
    """Contexts as vectors: ``features`` are ``[S, n, dim]`` floats (MNIST's pixels), one of
    ``n_actions`` actions each."""

    kind: ClassVar[str] = "context vectors"
    dim: int
    n_actions: int
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class TokenPromptSpec(ObservationSpec):
    """Token prompts of ``prompt_len`` ids in ``[0, vocab)`` answered by ``answer_len`` tokens (the
    sequence problems; ``Prompts``)."""

    kind: ClassVar[str] = "token prompts"
    vocab: int
    prompt_len: int
    answer_len: int
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class TextPromptSpec(ObservationSpec):
    """Tokenised text prompts, left-padded (``TextPrompts``), answered by up to ``new_tokens`` tokens
    ended by the EOS of ``tokenizer()`` (a provider: a pretrained one loads on first use; the text
    problems)."""

    kind: ClassVar[str] = "text prompts"
    new_tokens: int
    tokenizer: Callable[[], Any]


def kinds(specs: Sequence[type[ObservationSpec]]) -> str:
    """'context ids or context vectors'."""
    return " or ".join(s.kind for s in specs) or "no declared observations"


def check_reads(what: str, reads: Sequence[type[ObservationSpec]], spec: ObservationSpec, where: str) -> None:
    """Refuse ``what`` (``policy 'tabular'``) that reads ``reads`` on ``where`` (``task 'mnist'``),
    whose environment shows ``spec``: one line naming both."""
    if not isinstance(spec, tuple(reads)):
        raise ValueError(f"{what} reads {kinds(reads)}; {where} shows {spec.kind}")


__all__ = ["ContextIdSpec", "ContextVectorSpec", "Contexts", "ObservationSpec", "Prompts", "TextPromptSpec",
           "TextPrompts", "TokenPromptSpec", "check_reads", "kinds"]
