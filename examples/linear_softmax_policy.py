# run: sandbox run --plugin FILE --set task=reverse_copy --set task_kwargs.H=5 --set task_kwargs.policy=linear_softmax --set estimator=reinforce --set lr=0.1 --set steps=60
"""A new policy family in one file: a linear softmax over the prompt's one-hot tokens, one weight
block per answer position, z_t = Σ_p W[t, p, x_p] + b[t] — enough to reverse a prompt.

It implements the ``Policy`` protocol (``sandbox.policies.base``): ``init`` over a population of
seeds, ``sample`` through the one decode loop (the actor's chain: frictions, temperature, ε) and
``score``, the one scorer the actor's report and the learner share. It reads token prompts
(``reads``), so any sequence task trains it by name, ``task_kwargs.policy=linear_softmax``, built from
the environment's spec as ``LinearSoftmax(vocab=, prompt_len=, answer_len=, dtype=)``; the first
line trains it on token reversal.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sandbox.core.observations import TokenPromptSpec
from sandbox.policies import Policy, PolicySample, register_policy
from sandbox.policies.decode import Versions, decode, fresh, teacher_forced


@register_policy("linear_softmax")
@dataclass(frozen=True)
class LinearSoftmax(Policy):
    """Answer token t ~ softmax(Σ_p W[t, p, x_p] + b[t]) over a vocabulary of ``vocab`` tokens."""

    vocab: int
    prompt_len: int
    answer_len: int
    dtype: torch.dtype = torch.float32

    reads = (TokenPromptSpec,)  # prompts of token ids (the sequence problems)
    n_actions = property(lambda self: self.vocab)

    def init(self, population, generator):
        A, P, V = self.answer_len, self.prompt_len, self.vocab  # zeros: the uniform policy
        return [torch.zeros(population, A, P * V, V, dtype=self.dtype), torch.zeros(population, A, V, dtype=self.dtype)]

    def logits(self, params, prompts, per_prompt):
        """``[S, G·M, A, V]`` for prompts ``[S, G, P]``, each answered by ``per_prompt`` rows."""
        W, b = params
        x = F.one_hot(prompts, self.vocab).to(W.dtype).flatten(-2)  # [S, G, P·V]
        return (torch.einsum("sgi,saiv->sgav", x, W) + b[:, None]).repeat_interleave(per_prompt, 1)

    def sample(self, params, obs, chain, generator, versions=None):
        versions = versions or Versions.single(params, obs.answer_len)
        S, G, _ = obs.tokens.shape
        steps = lambda p, answered: self.logits(p, obs.tokens, obs.per_prompt)[:, :, answered.shape[-1]]  # noqa: E731
        out = decode(steps, versions, chain, fresh(generator), (S, G * obs.per_prompt))
        forced = lambda p, actions: chain.distribution(self.logits(p, obs.tokens, actions.shape[1] // G))[0]  # noqa: E731
        return PolicySample(out.actions, out.logp, teacher_forced(forced, versions, out))

    def score(self, params, obs, actions):
        z = self.logits(params, obs.tokens, actions.shape[1] // obs.tokens.shape[1]) / self.temperature
        return torch.log_softmax(z, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
