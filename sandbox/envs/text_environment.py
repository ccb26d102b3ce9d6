"""A text problem (``TextEnv``) as an ``Environment`` (``sandbox.envs.base``) for causal LMs: the
problems' prompts and answers through a tokenizer, rewards from the decoded completions.

Each step draws ``prompts_per_step`` problems and ``samples_per_prompt`` completions of each (group
id = prompt); R is the environment's score of the decoded completion (the verifier reads text: on
the host). Prompts are left-padded (``chat``: the question in the user's turn of the tokenizer's
chat template); correct and wrong answers are right-padded to ``new_tokens`` with EOS appended.
Evaluation: ``eval_prompts`` fresh problems, one sample each from the current learner's own policy
(its temperature, no friction): ``reward`` (mean), ``accuracy`` (completion = answer) and
``error`` = (R_max − reward)/(R_max − R_min).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sandbox.core.observations import TextPromptSpec
from sandbox.core.sampling import SamplingChain
from sandbox.core.tokens import token_mask
from sandbox.envs.base import Batch, Environment, TextPrompts
from sandbox.envs.text import TextEnv, encode_batch


@dataclass(eq=False)
class TextEnvironment(Environment):
    """``text_env`` through the tokenizer ``tokenizer()`` (a provider: a pretrained one is loaded on first use)."""

    text_env: TextEnv
    tokenizer: Callable[[], Any]
    new_tokens: int
    prompts_per_step: int = 16
    samples_per_prompt: int = 4
    eval_prompts: int = 64
    chat: bool = False

    population = 1  # one model per run

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return tuple(self.text_env.reward_range)

    def encode(self, problems, repeat: int) -> dict[str, Any]:
        """Prompt ids and mask, target and wrong answers (right-padded, EOS appended) of ``problems``,
        each row repeated ``repeat`` times, on the run's device; ``answers`` as text."""
        tok = self.tokenizer()
        prompts = [tok.chat(p.question) if self.chat else p.prompt for p in problems for _ in range(repeat)]
        answers = [p.answer for p in problems for _ in range(repeat)]
        wrong = [self.text_env.wrong_answer(p) for p in problems for _ in range(repeat)]
        prompt_ids, prompt_mask = encode_batch(tok, prompts, side="left")
        T = self.new_tokens
        target, _ = encode_batch(tok, answers, side="right", length=T, append_eos=True)
        wrong_ids, _ = encode_batch(tok, wrong, side="right", length=T, append_eos=True)
        move = lambda x: x.to(self.device)  # noqa: E731
        return {"prompt_ids": move(prompt_ids), "prompt_mask": move(prompt_mask), "target": move(target),
                "wrong": move(wrong_ids), "answers": answers}

    def score_text(self, actions: Tensor, answers: Sequence[str]) -> Tensor:
        """Rewards ``[B]`` of completions ``[B, T]`` (the verifier reads text: on the host)."""
        tok = self.tokenizer()
        texts = [tok.decode(row, errors="replace") for row in actions.cpu()]
        return self.text_env.scores(texts, answers).to(actions.device)

    def draw_batch(self, generator):
        n, G = self.prompts_per_step, self.samples_per_prompt
        rows = self.encode(self.text_env.sample(n, generator), G)
        eos = self.tokenizer().eos_id
        extras = {"prompt_mask": rows["prompt_mask"].unsqueeze(0), "target": rows["target"].unsqueeze(0),
                  "target_mask": token_mask(rows["target"], eos).unsqueeze(0)}
        return Batch(obs=rows["prompt_ids"].unsqueeze(0), rows=rows,
                     group=torch.arange(n, device=self.device).repeat_interleave(G), extras=extras)

    @property
    def spec(self) -> TextPromptSpec:
        return TextPromptSpec(self.new_tokens, self.tokenizer)

    def observe(self, obs, extras):
        return TextPrompts(obs[0], extras["prompt_mask"][0], self.samples_per_prompt)

    def correct_answers(self, batch):
        return batch.rows["target"].unsqueeze(0)

    def wrong_answers(self, batch):
        return batch.rows["wrong"].unsqueeze(0)

    def reward(self, batch, actions, generator):
        return self.score_text(actions[0], batch.rows["answers"]).unsqueeze(0)

    def token_mask(self, batch, actions):
        return token_mask(actions, self.tokenizer().eos_id)

    def target(self, extras):
        return extras["target"]

    def evaluate(self, policy, params, generator):
        batch = self.encode(self.text_env.sample(self.eval_prompts, generator), 1)
        obs = TextPrompts(batch["prompt_ids"], batch["prompt_mask"])
        tokens = policy.sample(params, obs, SamplingChain(temperature=policy.temperature), generator).actions[0]
        rewards = self.score_text(tokens, batch["answers"])
        tok = self.tokenizer()
        exact = torch.tensor([tok.decode(row, errors="replace") == a for row, a in zip(tokens.cpu(), batch["answers"])],
                             device=self.device)
        low, high = self.reward_range
        mean = rewards.mean()
        return {"reward": mean.reshape(1), "accuracy": exact.float().mean().reshape(1),
                "error": ((high - mean) / (high - low)).reshape(1)}


__all__ = ["TextEnvironment", "token_mask"]
