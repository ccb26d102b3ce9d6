"""The tiny transformer (``sandbox.policies.transformer``) as a ``Policy`` over the ``Prompts`` a
sequence environment shows: answers of ``answer_len`` tokens to prompts ``[S, G, P]``, each
prompt answered by ``per_prompt`` rows; π(a_t | prompt, a_<t) = softmax(z_t) (τ = 1: the sequence
tasks' ``temperature`` knob is a sampler temperature over this policy, ``sandbox.policies.base``).

Sampling runs the one decode loop with the KV cache, or teacher-forced when the rollout is resumed
under several versions (``resumable``); the actor's scorer of any tokens is the teacher-forced
twin through the same chain. ``score`` runs each group's prompt once (``share_prompts``) or the
plain reference path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from sandbox.core.observations import TokenPromptSpec
from sandbox.policies.base import Policy, PolicySample, register_policy
from sandbox.policies.decode import Versions, teacher_forced
from sandbox.policies.transformer import Transformer


@register_policy("transformer")
@dataclass(frozen=True)
class TransformerPolicy(Policy):
    """``model`` (a ``Transformer`` configuration) with parameters of ``dtype``; ``share_prompts``:
    the learner's fast path (each group's prompt run once)."""

    model: Transformer
    dtype: torch.dtype = torch.float32
    share_prompts: bool = True

    reads = (TokenPromptSpec,)
    resumable: ClassVar[bool] = True  # partial rollouts: each position decoded by its version
    scores_regrouped: ClassVar[bool] = True  # the screened objective's rows: ``Prompts.groups``
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")

    @classmethod
    def from_spec(cls, spec, share_prompts: bool = True, **model):
        """The tiny transformer over the spec's vocabulary and context (its ``Transformer`` knobs:
        width, heads, layers, mlp, init_std, variant)."""
        return cls(Transformer(vocab=spec.vocab, context=spec.prompt_len + spec.answer_len, **model), spec.dtype,
                   share_prompts)

    @property
    def n_actions(self) -> int:
        return self.model.vocab

    def init(self, population, generator):
        return self.model.init(population, generator, self.dtype)

    def sample(self, params, obs, chain, generator, versions=None):
        resumed = versions is not None  # decoded teacher-forced: a KV cache holds one version's keys
        versions = versions if resumed else Versions.single(params, obs.answer_len)
        out = self.model.sample(params, obs.tokens, obs.per_prompt, obs.answer_len, generator, chain=chain,
                                cache=not resumed, versions=versions, eos=obs.eos)
        forced = lambda p, actions: chain.distribution(self.model.answer_logits(p, obs.tokens, actions))[0]  # noqa: E731
        return PolicySample(out.actions, out.logp, teacher_forced(forced, versions, out))

    def score(self, params, obs, actions):
        if obs.groups is not None:  # rows answer the prompts ``groups`` names (the grouped scorer)
            return self.model.answer_logp(params, obs.tokens, actions, groups=obs.groups)
        return self.model.answer_logp(params, obs.tokens, actions, share_prompts=self.share_prompts)

    def token_logits(self, params, obs, actions):
        return self.model.answer_logits(params, obs.tokens, actions)


__all__ = ["TransformerPolicy"]
