"""A ``transformers`` causal LM as a ``Policy`` (``sandbox.policies.base``) over the left-padded
``TextPrompts`` a text environment shows: π_θ(a_t | prompt, a_<t) = softmax(z_t/τ) at the policy's
``temperature`` τ (the learner scores it, evaluation and the actor sample it).

``init`` builds (or loads) the model from the task's generator and holds its parameters outside it
(``CausalLMPolicy``: population tensors ``[1, ...]``); the actor copies the (possibly stale)
parameters into a cached module of their dtype and samples with the KV cache through the one
decode loop; ``score`` is the teacher-forced (fused or naive) log-prob of the learner. It reads
text prompts and, as a tiny random model over the problem's tokens, a sequence problem's token
prompts (``sandbox.policies.hf.prompts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from sandbox.core.observations import Prompts, TextPromptSpec, TokenPromptSpec
from sandbox.core.tokens import token_mask
from sandbox.core.validation import check_choice, check_int
from sandbox.policies.base import Policy, PolicySample, Scored, register_policy
from sandbox.policies.decode import Versions, teacher_forced
from sandbox.policies.hf.logprob import CausalLMPolicy, forced_logits
from sandbox.policies.hf.model import ARCHS, DTYPES, tiny_causal_lm
from sandbox.policies.hf.prompts import PromptVocab, as_text
from sandbox.policies.hf.sampling import sample_completions


def last_layers(model: nn.Module, k: int) -> list[str]:
    """Names of the parameters of the last ``k`` decoder layers and the final norm (Llama/Qwen2
    layout: ``model.layers.{i}.…``, ``model.norm.…``)."""
    layers = int(model.config.num_hidden_layers)
    check_int("train_layers", k, low=1, high=layers)
    prefixes = tuple(f"model.layers.{i}." for i in range(layers - k, layers)) + ("model.norm.",)
    names = [name for name, _ in model.named_parameters() if name.startswith(prefixes)]
    if not names:
        raise ValueError(f"train_layers: {type(model).__name__} has no parameters named model.layers.* / model.norm.*")
    return names


@register_policy("causal_lm")
@dataclass(eq=False)
class HFPolicy(Policy):
    """The causal LM ``build(generator)`` makes, decoding ``new_tokens`` tokens with the
    ``tokenizer()``'s EOS and padding; ``method``/``chunk_size``/``backend``: the learner's
    log-prob kernel; ``train_layers`` ≥ 1 trains only the last k decoder layers and the final norm."""

    build: Callable[[torch.Generator], nn.Module]
    tokenizer: Callable[[], Any]
    new_tokens: int
    temperature: float = 1.0
    method: str = "fused"
    chunk_size: int = 1024
    backend: str = "auto"
    train_layers: int = 0
    lm: CausalLMPolicy | None = field(default=None, repr=False)  # built by ``init``

    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    reads = (TextPromptSpec, TokenPromptSpec)
    one_model_per_run: ClassVar[bool] = True  # a population of 1: seeds are separate runs

    @classmethod
    def from_spec(cls, spec, arch: str = "qwen2", hidden: int = 64, layers: int = 2, heads: int = 4,
                  tie_embeddings: bool = False, dtype: str | None = None, **policy):
        """A tiny random ``arch`` causal LM (``tiny_causal_lm``, seeded by the run's generator) over the
        spec's tokenizer, decoding ``new_tokens`` — or over a sequence problem's V tokens, decoding its
        ``answer_len`` (``sandbox.policies.hf.prompts``); ``dtype`` defaults to the spec's (float32 for
        text); ``policy``: its temperature, log-prob kernel, train_layers."""
        tokens = isinstance(spec, TokenPromptSpec)
        dtype = dtype or (str(spec.dtype).removeprefix("torch.") if tokens else "float32")
        check_choice("arch", arch, ARCHS)
        check_choice("dtype", dtype, DTYPES)
        vocab = PromptVocab(spec.vocab) if tokens else None
        tokenizer = (lambda: vocab) if tokens else spec.tokenizer

        def build(generator):
            return tiny_causal_lm(tokenizer().vocab_size, hidden, layers, heads, arch=arch,
                                  tie_embeddings=tie_embeddings, seed=generator).to(getattr(torch, dtype))
        return cls(build, tokenizer, spec.answer_len if tokens else spec.new_tokens, **policy)

    @property
    def n_actions(self) -> int:
        """The model's vocabulary once built (may exceed the tokenizer's), else the tokenizer's."""
        return self.lm.vocab_size if self.lm is not None else self.tokenizer().vocab_size

    def require(self) -> CausalLMPolicy:
        if self.lm is None:
            raise ValueError("call init_params first: it builds (or loads) the model")
        return self.lm

    def init(self, population, generator):
        model = self.build(generator).to(self.device)
        self.lm = CausalLMPolicy(model, temperature=self.temperature, method=self.method, chunk_size=self.chunk_size,
                                 backend=self.backend,
                                 trainable=last_layers(model, self.train_layers) if self.train_layers else None)
        return self.lm.parameters()

    @staticmethod
    def text(obs):
        """What it reads of ``obs``: text prompts as they are, a sequence problem's token prompts as rows of ids."""
        return as_text(obs) if isinstance(obs, Prompts) else obs

    def sample(self, params, obs, chain, generator, versions=None):
        obs = self.text(obs)
        module = self.require().actor(params)
        tok = self.tokenizer()
        comp = sample_completions(module, obs.ids, obs.mask, max_new_tokens=self.new_tokens, eos_id=tok.eos_id,
                                  pad_id=tok.pad_id, generator=generator, chain=chain)
        # the actor's own log-probs of any tokens [1, B, T] (its dtype and chain), every row recomputed, 0 after EOS
        forced = lambda m, a: chain.distribution(forced_logits(m, obs.ids, obs.mask, a[0]).unsqueeze(0))[0]  # noqa: E731
        logp_of = teacher_forced(forced, Versions.single(module, self.new_tokens),
                                 mask_of=lambda a: token_mask(a, tok.eos_id))
        return PolicySample(comp.tokens.unsqueeze(0), comp.logp.unsqueeze(0), logp_of)

    def score(self, params, obs, actions):
        obs = self.text(obs)
        tokens = actions[0]
        mask = token_mask(tokens, self.tokenizer().eos_id)
        return self.require().logp(params, obs.ids, obs.mask, tokens, mask).unsqueeze(0)

    def scored(self, params, obs, actions, target=None):
        """The actions' log-probs and the supervised target's, scored once per prompt (shared by its G samples)."""
        obs = self.text(obs)
        logp = self.score(params, obs, actions)
        if target is None:
            return Scored(logp)
        G, rows = obs.per_prompt, target[0][:: obs.per_prompt]
        target_logp = self.require().logp(params, obs.ids[::G], obs.mask[::G], rows,
                                          token_mask(rows, self.tokenizer().eos_id))
        return Scored(logp=logp, target_logp=target_logp.repeat_interleave(G, 0).unsqueeze(0))

    def sampler_mismatch(self, obs, actor_params, params, sample):
        """The learner's precision's log-probs of the sampled tokens where the actor sampled in
        another dtype (a precision mismatch), else None."""
        if params[0].dtype == self.require().dtype:
            return None
        obs = self.text(obs)
        tokens = sample.actions[0]
        with torch.no_grad():
            learner = self.lm.logp(list(actor_params), obs.ids, obs.mask, tokens, token_mask(tokens, self.tokenizer().eos_id))
        return learner.float().unsqueeze(0)


__all__ = ["HFPolicy", "last_layers"]
