"""A sequence problem (``SequenceEnv``) as an ``Environment`` (``sandbox.envs.base``): the batch
layout, the training-prompt options and the evaluation of the sequence tasks.

Each step draws ``prompts_per_step`` prompts and ``samples_per_prompt`` answers to each; rows are
grouped by prompt (row g·M + m answers prompt g) and the group is the baseline's group. Options
``n_prompts`` (a fixed pool of n prompts per seed, drawn with replacement each step, after the
policy's parameters) and ``p_easy`` (each training prompt is all zeros with probability p) shape
the training prompts only.

Error: from a fresh batch of prompts of the full distribution, sampled by the **current** learner
(its own policy: no sampler temperature, no ε, no friction), 1 − mean R for rewards in [0, 1] and
(1 − mean R)/2 (the fraction of wrong answers) for ±1 rewards, so that 0 is perfect in every problem.
``eval_mode='exact'`` enumerates every prompt and answer instead.

Sequence error (``seq_error=True``; P1 reports it for token reversal): the probability that an
answer sampled by the learner is not entirely right, 1 − E_x π(y*|x), computed *exactly* per prompt
by teacher-forcing its one correct answer y* — over all V^P prompts when there are at most
``SEQ_ERROR_PROMPTS`` of them (H = 10, V = 2: 1,024), else over that many prompts drawn once from a
fixed generator. No sampling noise, so it resolves 10⁻⁴ and below (per-position error at H = 10 on
1,000 sampled answers resolves 10⁻³ at best).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.core.observations import TokenPromptSpec
from sandbox.core.sampling import IDENTITY
from sandbox.envs.base import Batch, Environment, Prompts
from sandbox.envs.sequences.base import SequenceEnv, all_sequences, eos_mask, first_eos

SEQ_ERROR_PROMPTS = 1 << 12  # most prompts the sequence error enumerates; a fixed sample beyond


@dataclass(eq=False)
class SequenceEnvironment(Environment):
    """``problem`` over ``population`` seeds with the sequence tasks' batch and evaluation knobs."""

    problem: SequenceEnv
    population: int
    prompts_per_step: int = 10
    samples_per_prompt: int = 10
    n_prompts: int = 0
    p_easy: float = 0.0
    wrong_answer: str = "constant"
    with_target: bool = False  # rollouts keep the correct answers for the supervised target
    dtype: torch.dtype = torch.float32  # of the rewards
    eval_prompts: int = 100
    eval_samples: int = 10
    eval_mode: str = "sampled"  # 'sampled' | 'exact'
    seq_error: bool = False
    _pool: Tensor | None = field(default=None, repr=False)
    _seq_prompts: Tensor | None = field(default=None, repr=False)

    state_first = False  # the prompt pool is drawn after the policy's parameters

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return self.problem.reward_range

    def rewards(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Rewards ``[S, B]`` of answers ``[S, B, A]`` to their row prompts ``[S, B, P]``."""
        return self.problem.rewards(prompts, answers).to(self.dtype)

    # ------------------------------------------------------------------ training batches
    def reset(self, generator):
        if self.n_prompts:
            self._pool = self.problem.sample_prompts(self.population, self.n_prompts, generator)

    def training_prompts(self, n: int, generator: torch.Generator) -> Tensor:
        """Training prompts: from the finite pool (if any), all zeros with probability ``p_easy``."""
        if self._pool is not None:
            idx = torch.randint(0, self.n_prompts, (self.population, n), generator=generator)
            prompts = self._pool.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.problem.prompt_len))
        else:
            prompts = self.problem.sample_prompts(self.population, n, generator)
        if self.p_easy > 0:
            easy = torch.rand(self.population, n, 1, generator=generator) < self.p_easy
            prompts = torch.where(easy, torch.zeros_like(prompts), prompts)
        return prompts

    def draw_batch(self, generator):
        G, M = self.prompts_per_step, self.samples_per_prompt
        prompts = self.training_prompts(G, generator).to(self.device)  # [S, G, P]
        return Batch(obs=prompts, rows=prompts.repeat_interleave(M, dim=1),
                     group=torch.arange(G, device=self.device).repeat_interleave(M))

    @property
    def spec(self) -> TokenPromptSpec:
        p = self.problem
        return TokenPromptSpec(p.vocab, p.prompt_len, p.answer_len, self.dtype)

    def observe(self, obs, extras):
        return Prompts(obs, self.samples_per_prompt, self.problem.answer_len, self.problem.eos)

    def token_mask(self, batch, actions):
        """Every token, or (a problem with an EOS) every token up to and including the first EOS."""
        if self.problem.eos is None:
            return super().token_mask(batch, actions)
        return eos_mask(actions, self.problem.eos)

    def correct_answers(self, batch):
        return self.problem.correct_answers(batch.rows)

    def solution_traces(self, n: int, generator: torch.Generator, slip: float = 0.0,
                        spread: float = 0.0) -> tuple[Prompts, Tensor, Tensor]:
        """``n`` fresh prompts per member with their correct answers, for supervised fine-tuning:
        (what the policy sees, answers ``[S, n, A]``, valid tokens ``[S, n, A]``); ``slip`` > 0: the
        problem's ``slipped_answers`` at that rate (and ``spread``) instead (traces with errors)."""
        prompts = self.problem.sample_prompts(self.population, n, generator).to(self.device)
        answers = self.problem.slipped_answers(prompts, slip, generator, spread) if slip else self.problem.correct_answers(prompts)
        mask = eos_mask(answers, self.problem.eos) if self.problem.eos is not None else torch.ones_like(answers, dtype=torch.bool)
        return Prompts(prompts, 1, self.problem.answer_len, self.problem.eos), answers, mask

    def wrong_answers(self, batch):
        return self.problem.wrong_answers(batch.rows, self.wrong_answer)

    def reward(self, batch, actions, generator):
        return self.rewards(batch.rows, actions)

    def rollout_extras(self, batch, correct, frictions):
        return {"correct": correct} if (frictions or self.with_target) else {}

    def target(self, extras):
        return extras["correct"] if self.with_target else None

    def state_dict(self):
        return {"_pool": self._pool}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, policy, params, generator):
        """``error`` (see the module docstring), mean ``reward`` and ``exact`` (the rate of fully
        correct answers), each ``[S]``; from a fresh sampled batch or, with ``eval_mode='exact'``,
        the exact expectation over every prompt and answer."""
        if self.eval_mode == "exact":
            metrics = self.exact_evaluation(policy, params)
        else:
            metrics = self.sampled_evaluation(policy, params, generator)
        if self.seq_error:
            metrics["seq_error"] = self.sequence_error(policy, params)
        return metrics

    def sampled_evaluation(self, policy, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """The metrics of ``eval_prompts`` fresh prompts × ``eval_samples`` answers sampled by the learner."""
        prompts = self.problem.sample_prompts(self.population, self.eval_prompts, generator).to(self.device)
        M = self.eval_samples
        with torch.no_grad():
            actions = policy.sample(params, Prompts(prompts, M, self.problem.answer_len, self.problem.eos), IDENTITY,
                                    generator).actions
        rows = prompts.repeat_interleave(M, dim=1)
        rewards = self.rewards(rows, actions)
        exact = self.problem.fully_correct(rows, actions)
        metrics = {"error": self.problem.error(rewards), "reward": rewards.mean(-1),
                   "exact": exact.to(rewards.dtype).mean(-1)}
        if self.problem.eos is not None:  # answers that end: their length and the truncated share
            end = first_eos(actions, self.problem.eos)
            metrics["truncated"] = (end >= actions.shape[-1]).to(rewards.dtype).mean(-1)
            metrics["answer_length"] = (end + 1).clamp(max=actions.shape[-1]).to(rewards.dtype).mean(-1)
        return metrics

    def sequence_error(self, policy, params: Sequence[Tensor]) -> Tensor:
        """``[S]``: 1 − E_x π(y*|x) over every prompt (or a fixed sample of ``SEQ_ERROR_PROMPTS``),
        exact per prompt — the learner's probability of answering it entirely right, teacher-forced."""
        problem = self.problem
        if self._seq_prompts is None:
            if problem.uniform_prompts and problem.vocab ** problem.prompt_len <= SEQ_ERROR_PROMPTS:
                self._seq_prompts = all_sequences(problem.prompt_len, problem.vocab)
            else:
                fixed = torch.Generator().manual_seed(0)  # the same prompts at every step and seed
                self._seq_prompts = problem.sample_prompts(1, SEQ_ERROR_PROMPTS, fixed)[0]
        prompts = self._seq_prompts.to(self.device).expand(self.population, -1, -1)
        with torch.no_grad():
            logp = policy.score(params, Prompts(prompts, 1, problem.answer_len), problem.correct_answers(prompts))
        return 1 - logp.to(torch.float64).sum(-1).exp().mean(-1).to(logp.dtype)

    def exact_evaluation(self, policy, params: Sequence[Tensor]) -> dict[str, Tensor]:
        """E[R] under the learner for uniform prompts, by enumerating all V^P prompts and V^A answers."""
        S, P, A, V = self.population, self.problem.prompt_len, self.problem.answer_len, self.problem.vocab
        prompts, answers = all_sequences(P, V).to(self.device), all_sequences(A, V).to(self.device)
        n_p, n_a = prompts.shape[0], answers.shape[0]
        with torch.no_grad():
            logp = policy.score(params, Prompts(prompts.expand(S, n_p, P), n_a, A), answers.repeat(n_p, 1).expand(S, -1, A))
        probs = logp.sum(-1).exp().reshape(S, n_p, n_a)
        rows = prompts.repeat_interleave(n_a, 0)
        rewards = self.rewards(rows, answers.repeat(n_p, 1)).reshape(n_p, n_a).to(probs.dtype)
        correct = self.problem.fully_correct(rows, answers.repeat(n_p, 1)).reshape(n_p, n_a)
        expected = (probs * rewards).sum(-1)  # [S, n_p]
        return {"error": self.problem.error(expected), "reward": expected.mean(-1),
                "exact": (probs * correct.to(probs.dtype)).sum(-1).mean(-1)}


__all__ = ["SEQ_ERROR_PROMPTS", "SequenceEnvironment"]
