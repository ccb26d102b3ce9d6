"""Synthetic transformer sequence tasks (shared/spec/environments.md, "Synthetic transformer
sequence tasks"; the token-reversal task of "Delightful Policy Gradient", arXiv 2603.14608).

A sequence is the plain concatenation [prompt ; answer] (no special tokens, fixed answer length)
and the policy is the tiny transformer of ``sandbox.policies.transformer``.

| task | V | prompt | answer | reward |
|---|---|---|---|---|
| ``reverse_copy`` | 2 | H | H | R = κ·c + (1 − κ)·1[all correct]; c = (correct prefix length)/H (``to_first_error``) or the fraction of matching positions (``per_position``); ``order='forward'`` copies, ``shift=1`` adds 1 mod V |
| ``bit_parity`` | 2 | H | 1 | +1 if the answer is the even-parity bit Σx mod 2, else −1 |
| ``key_value`` | 10 | 2n + 1 | 1 | +1 if the answer is the value of the last key equal to the query, else −1 |
| ``subsequence_match`` | 5 | 2 | 32 | +1 if the prompt is a (non-contiguous) subsequence of the answer, else −1 |

Error: 1 − mean R of a fresh batch of prompts from the full task distribution, sampled by the
**current** learner (temperature 1, no ε, no friction); for the ±1 rewards the error is
(1 − mean R)/2, the fraction of wrong answers, so that 0 is perfect in every task.

Each step draws ``prompts_per_step`` prompts and ``samples_per_prompt`` answers to each; rows are
grouped by prompt (row g·M + m answers prompt g) and the group is the baseline's group. Task
options ``n_prompts`` (a fixed pool of n prompts per seed, drawn with replacement each step) and
``p_easy`` (each training prompt is all zeros with probability p) shape the training prompts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.advantages import Advantage, compute_advantages
from sandbox.estimators.base import EstimatorOutput, PGTerms, TokenLoss, aggregate, masked_mean
from sandbox.estimators.delight import Kondo
from sandbox.frictions.base import Friction, FrictionContext, FrictionStack, Sample
from sandbox.policies.transformer import Transformer
from sandbox.rollout import Rollout
from sandbox.runtime.task import Task, register_task
from sandbox.validation import check_choice, check_range

TASK_NAMES = ("reverse_copy", "bit_parity", "key_value", "subsequence_match")
DEFAULT_VOCAB = {"reverse_copy": 2, "bit_parity": 2, "key_value": 10, "subsequence_match": 5}
MATCHES = ("to_first_error", "per_position")
EXACT_EVAL_LIMIT = 1 << 14  # most (prompt, answer) pairs that eval_mode='exact' enumerates


# ----------------------------------------------------------------------------- rewards (pure functions)
def reversal_targets(prompts: Tensor, vocab: int, order: str = "reverse", shift: int = 0) -> Tensor:
    """The correct answer of ``reverse_copy``: the prompt reversed (or copied), plus ``shift`` mod V."""
    target = prompts.flip(-1) if order == "reverse" else prompts
    return (target + shift) % vocab


def reversal_reward(answers: Tensor, targets: Tensor, match: str = "to_first_error", kappa: float = 1.0) -> Tensor:
    """R = κ·c + (1 − κ)·1[answer = target]; c = (length of the correct prefix)/H or the fraction of
    matching positions. ``answers``, ``targets`` ``[..., H]`` → ``[...]``."""
    check_choice("match", match, MATCHES)
    correct = answers == targets
    H = correct.shape[-1]
    if match == "to_first_error":
        c = torch.cumprod(correct.to(torch.long), -1).sum(-1).to(torch.get_default_dtype()) / H
    else:
        c = correct.to(torch.get_default_dtype()).mean(-1)
    return kappa * c + (1 - kappa) * correct.all(-1).to(c.dtype)


def parity_labels(prompts: Tensor) -> Tensor:
    """The even-parity bit Σ x mod 2 of each prompt ``[..., H]`` → ``[...]``."""
    return prompts.sum(-1) % 2


def key_value_labels(prompts: Tensor) -> Tensor:
    """Prompt [k₁, v₁, …, kₙ, vₙ, q]: the value of the last key equal to q → ``[...]``."""
    keys, values, query = prompts[..., 0:-1:2], prompts[..., 1:-1:2], prompts[..., -1:]
    n = keys.shape[-1]
    hit = keys == query
    last = torch.where(hit, torch.arange(n), torch.full_like(keys, -1)).amax(-1, keepdim=True)
    return values.gather(-1, last.clamp(min=0)).squeeze(-1)


def is_subsequence(prompts: Tensor, answers: Tensor) -> Tensor:
    """Whether each prompt ``[..., P]`` is a (non-contiguous) subsequence of its answer ``[..., A]``
    (greedy matching, left to right) → bool ``[...]``."""
    P = prompts.shape[-1]
    matched = torch.zeros(answers.shape[:-1], dtype=torch.long)
    for t in range(answers.shape[-1]):
        nxt = prompts.gather(-1, matched.clamp(max=P - 1).unsqueeze(-1)).squeeze(-1)
        matched = matched + ((matched < P) & (answers[..., t] == nxt)).to(torch.long)
    return matched == P


def signed(correct: Tensor) -> Tensor:
    """+1 where correct, −1 elsewhere."""
    return correct.to(torch.get_default_dtype()) * 2 - 1


def _hooks(stack: FrictionStack, hook: str) -> bool:
    """Whether a friction of ``stack`` transforms ``hook`` ('actor_logits', 'actor_probs')."""
    return any(getattr(type(f), hook) is not getattr(Friction, hook) for f in stack.frictions)


# ----------------------------------------------------------------------------- the task
@register_task("sequences")
@dataclass
class SequenceTask(Task):
    """One of the four sequence tasks (``problem``) learnt by the tiny transformer.

    Defaults are the spec's: H = 10, V per task (2, 2, 10, 5), 10 prompts × 10 samples per step.
    ``backward='screened'`` runs Kondo screening for real: ``learner_terms`` scores the batch with
    a no-grad forward, and ``objective`` runs the differentiable forward and backward only on the
    rows that hold a kept token with a nonzero advantage (requires the ``kondo`` estimator).
    """

    problem: str = "reverse_copy"  # one of TASK_NAMES
    H: int = 10  # reverse_copy: prompt = answer length; bit_parity: prompt length
    V: int = 0  # vocabulary; 0 = the task's default (2, 2, 10, 5)
    n_pairs: int = 5  # key_value: pairs in the prompt (prompt length 2n + 1)
    sub_prompt: int = 2  # subsequence_match: prompt length P
    sub_answer: int = 32  # subsequence_match: answer length A (≥ P)
    order: str = "reverse"  # reverse_copy: 'reverse' | 'forward' (copy)
    shift: int = 0  # reverse_copy: target token = (x + shift) mod V
    match: str = "to_first_error"  # reverse_copy: 'to_first_error' | 'per_position'
    kappa: float = 1.0  # reverse_copy: weight of the partial credit c, in [0, 1]
    wrong_answer: str = "shifted"  # landmine's fixed wrong answer: 'shifted' (correct + 1 mod V) | 'constant' (all 0)
    prompts_per_step: int = 10
    samples_per_prompt: int = 10
    n_prompts: int = 0  # finite prompts: a fixed pool of n prompts per seed (0 = fresh prompts)
    p_easy: float = 0.0  # easy prompts: a training prompt is all zeros with this probability
    population: int = 1  # seeds S trained as one batched computation
    width: int = 64
    heads: int = 4
    layers: int = 3
    mlp: int = 128
    init_std: float = 0.02  # the gpt2 variant's weight std
    variant: str = "reference"  # transformer: 'reference' (the egg model) | 'gpt2'
    temperature: float = 1.0  # sampler temperature (the learner's policy is at temperature 1)
    eps_mix: float = 0.0  # sampler ε-mixing with the uniform distribution (reported in μ)
    eval_prompts: int = 100  # evaluation batch: eval_prompts × eval_samples fresh rows
    eval_samples: int = 10
    eval_mode: str = "sampled"  # 'sampled' (a fresh batch) | 'exact' (enumerate prompts × answers)
    share_prompts: bool = True  # learner fast path: each group's prompt is run once
    backward: str = "full"  # 'full' | 'screened' (Kondo: backward only on rows with a kept token)
    with_target: bool = False  # also score the correct answer (target_logp, for the xent oracle)
    dtype: str = "float32"  # 'float32' | 'float64'
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        check_choice("problem", self.problem, TASK_NAMES)
        check_range("H", self.H, low=1)
        check_range("V", self.V, low=0)
        check_range("n_pairs", self.n_pairs, low=1)
        check_range("sub_prompt", self.sub_prompt, low=1)
        check_range("sub_answer", self.sub_answer, low=self.sub_prompt)
        check_choice("order", self.order, ("reverse", "forward"))
        check_range("shift", self.shift, low=0)
        check_choice("match", self.match, MATCHES)
        check_range("kappa", self.kappa, low=0.0, high=1.0)
        check_choice("wrong_answer", self.wrong_answer, ("shifted", "constant"))
        check_range("prompts_per_step", self.prompts_per_step, low=1)
        check_range("samples_per_prompt", self.samples_per_prompt, low=1)
        check_range("n_prompts", self.n_prompts, low=0)
        check_range("p_easy", self.p_easy, low=0.0, high=1.0)
        check_range("population", self.population, low=1)
        check_range("temperature", self.temperature, low=0.0, low_open=True)
        check_range("eps_mix", self.eps_mix, low=0.0, high=1.0)
        check_range("eval_prompts", self.eval_prompts, low=1)
        check_range("eval_samples", self.eval_samples, low=1)
        check_choice("eval_mode", self.eval_mode, ("sampled", "exact"))
        check_choice("backward", self.backward, ("full", "screened"))
        check_choice("dtype", self.dtype, ("float32", "float64"))
        self.vocab = self.V or DEFAULT_VOCAB[self.problem]
        check_range("V", self.vocab, low=2)
        if self.problem == "bit_parity" and self.vocab != 2:
            raise ValueError(f"bit_parity has a binary vocabulary: V must be 2 (or 0), got {self.V}")
        self.n_actions = self.vocab
        self.prompt_len, self.answer_len = {
            "reverse_copy": (self.H, self.H), "bit_parity": (self.H, 1),
            "key_value": (2 * self.n_pairs + 1, 1), "subsequence_match": (self.sub_prompt, self.sub_answer),
        }[self.problem]
        self.reward_range = (0.0, 1.0) if self.problem == "reverse_copy" else (-1.0, 1.0)
        self.model = Transformer(vocab=self.vocab, context=self.prompt_len + self.answer_len, width=self.width,
                                 heads=self.heads, layers=self.layers, mlp=self.mlp, init_std=self.init_std,
                                 variant=self.variant)
        if self.eval_mode == "exact":
            if self.problem not in ("reverse_copy", "bit_parity"):
                raise ValueError(f"eval_mode='exact' enumerates uniform prompts: reverse_copy or bit_parity, "
                                 f"got problem={self.problem!r}")
            n = self.vocab ** (self.prompt_len + self.answer_len)
            if n > EXACT_EVAL_LIMIT:
                raise ValueError(f"eval_mode='exact' would score V^(P+A) = {n} sequences (limit {EXACT_EVAL_LIMIT}); "
                                 "use eval_mode='sampled'")
        self._pool: Tensor | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    # ------------------------------------------------------------------ environment
    def sample_prompts(self, n: int, generator: torch.Generator) -> Tensor:
        """``[S, n, P]`` prompts from the task's full distribution."""
        S, V = self.population, self.vocab
        if self.problem == "key_value":
            pairs = torch.randint(0, V, (S, n, self.n_pairs, 2), generator=generator)
            which = torch.randint(0, self.n_pairs, (S, n, 1), generator=generator)
            query = pairs[..., 0].gather(-1, which)
            return torch.cat([pairs.reshape(S, n, 2 * self.n_pairs), query], -1)
        return torch.randint(0, V, (S, n, self.prompt_len), generator=generator)

    def training_prompts(self, n: int, generator: torch.Generator) -> Tensor:
        """Training prompts: from the finite pool (if any), all zeros with probability ``p_easy``."""
        if self._pool is not None:
            idx = torch.randint(0, self.n_prompts, (self.population, n), generator=generator)
            prompts = self._pool.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.prompt_len))
        else:
            prompts = self.sample_prompts(n, generator)
        if self.p_easy > 0:
            easy = torch.rand(self.population, n, 1, generator=generator) < self.p_easy
            prompts = torch.where(easy, torch.zeros_like(prompts), prompts)
        return prompts

    def correct_answers(self, prompts: Tensor) -> Tensor:
        """A correct answer ``[..., A]`` per prompt (for subsequence_match: the prompt, then its
        last token repeated)."""
        if self.problem == "reverse_copy":
            return reversal_targets(prompts, self.vocab, self.order, self.shift)
        if self.problem == "bit_parity":
            return parity_labels(prompts).unsqueeze(-1)
        if self.problem == "key_value":
            return key_value_labels(prompts).unsqueeze(-1)
        pad = prompts[..., -1:].expand(*prompts.shape[:-1], self.answer_len - self.prompt_len)
        return torch.cat([prompts, pad], -1)

    def wrong_answers(self, prompts: Tensor) -> Tensor:
        """The fixed wrong answer of the landmine bug. ``'shifted'``: every token of the correct
        answer + 1 mod V (reward = the task's minimum; for subsequence_match the first prompt token
        + 1 mod V repeated, which never contains the prompt) — at V = 2 this is the complement, so
        pushing it down is the supervised direction. ``'constant'``: all zeros whatever the prompt
        (a stuck actor; it is correct for the rare prompts whose answer is all zeros)."""
        shape = (*prompts.shape[:-1], self.answer_len)
        if self.wrong_answer == "constant":
            return torch.zeros(shape, dtype=torch.long)
        if self.problem == "subsequence_match":
            return ((prompts[..., :1] + 1) % self.vocab).expand(shape)
        return (self.correct_answers(prompts) + 1) % self.vocab

    def rewards(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Rewards ``[S, B]`` of answers ``[S, B, A]`` to their row prompts ``[S, B, P]``."""
        dtype = self.torch_dtype
        if self.problem == "reverse_copy":
            targets = reversal_targets(prompts, self.vocab, self.order, self.shift)
            return reversal_reward(answers, targets, self.match, self.kappa).to(dtype)
        if self.problem == "subsequence_match":
            return signed(is_subsequence(prompts, answers)).to(dtype)
        return signed(answers[..., 0] == self.correct_answers(prompts)[..., 0]).to(dtype)

    def error(self, rewards: Tensor) -> Tensor:
        """0 is perfect: 1 − mean R for rewards in [0, 1], (1 − mean R)/2 for ±1 rewards."""
        mean = rewards.mean(-1)
        return 1 - mean if self.problem == "reverse_copy" else (1 - mean) / 2

    def group_ids(self) -> Tensor:
        return torch.arange(self.prompts_per_step).repeat_interleave(self.samples_per_prompt)

    # ------------------------------------------------------------------ parameters
    def init_params(self, generator):
        params = self.model.init(self.population, generator, self.torch_dtype)
        if self.n_prompts:
            self._pool = self.sample_prompts(self.n_prompts, generator)
        return params

    # ------------------------------------------------------------------ actor
    def friction_context(self, rows: Tensor, seed: int) -> FrictionContext:
        return FrictionContext(n_actions=self.vocab, reward_range=self.reward_range,
                               correct_actions=self.correct_answers(rows), wrong_actions=self.wrong_answers(rows),
                               seed=seed)

    def sample(self, params: Sequence[Tensor], prompts: Tensor, samples: int, generator: torch.Generator,
               ctx: FrictionContext | None = None, frictions: FrictionStack | None = None):
        """Answers and sampling log-probs ``[S, B, A]`` for ``prompts [S, G, P]`` with the actor's
        frictions applied to its parameters, logits (every token) and probabilities; returns the
        sample and the (friction-transformed) parameters the actor sampled with."""
        stack = frictions if frictions else FrictionStack()
        if stack:
            params = stack.actor_params(params, ctx)
        out = self.model.sample(
            params, prompts, samples, self.answer_len, generator, temperature=self.temperature, eps=self.eps_mix,
            logits_hook=(lambda z: stack.actor_logits(z, ctx, generator)) if _hooks(stack, "actor_logits") else None,
            probs_hook=(lambda p: stack.actor_probs(p, ctx)) if _hooks(stack, "actor_probs") else None,
        )
        return out, params

    def actor_logp(self, actor_params: Sequence[Tensor], prompts: Tensor, answers: Tensor, ctx: FrictionContext,
                   generator: torch.Generator) -> Tensor:
        """Teacher-forced log-probs ``[S, B, A]`` of ``answers`` under the actor's sampling
        distribution (``actor_params`` already friction-transformed; temperature, logit hooks,
        ε-mixing and probability hooks applied as in the sampler)."""
        logits = self.model.answer_logits(actor_params, prompts, answers)
        if self.temperature != 1.0:
            logits = logits / self.temperature
        if _hooks(self.frictions, "actor_logits"):
            logits = self.frictions.actor_logits(logits, ctx, generator)
        log_probs = torch.log_softmax(logits, -1)
        if self.eps_mix > 0 or _hooks(self.frictions, "actor_probs"):
            probs = log_probs.exp()
            if self.eps_mix > 0:
                probs = (1 - self.eps_mix) * probs + self.eps_mix / self.vocab
            log_probs = torch.log(self.frictions.actor_probs(probs, ctx))
        return log_probs.gather(-1, answers.unsqueeze(-1)).squeeze(-1)

    def collect(self, actor_params, step, version, generator, seed):
        G, M = self.prompts_per_step, self.samples_per_prompt
        prompts = self.training_prompts(G, generator)  # [S, G, P]
        rows = prompts.repeat_interleave(M, dim=1)  # [S, B, P]
        ctx = self.friction_context(rows, seed) if self.frictions else None
        with torch.no_grad():
            out, params = self.sample(actor_params, prompts, M, generator, ctx, self.frictions)
            sample = Sample(out.actions, out.logp, out.logp)
            replaced: dict[str, Tensor] = {}
            if self.frictions:
                def policy_logp(actions: Tensor) -> Tensor:
                    # exact for the rows the sampler drew (its own log-probs); a teacher-forced
                    # recompute for overridden rows (with fresh logit noise: one draw of the noise)
                    same = (actions == out.actions).all(-1, keepdim=True)
                    if bool(same.all()):
                        return out.logp
                    forced = self.actor_logp(params, prompts, actions, ctx, generator)
                    return torch.where(same, out.logp, forced)

                sample, replaced = self.frictions.override(sample, ctx, generator, policy_logp=policy_logp)
            rewards = self.rewards(rows, sample.actions)
            if self.frictions:
                rewards = self.frictions.reward(rewards, sample, ctx, generator, replaced)
        S, B, A = sample.actions.shape
        extras: dict[str, Tensor] = {}
        if ctx is not None or self.with_target:
            extras["correct"] = self.correct_answers(rows) if ctx is None else ctx.correct_actions
        for name, flags in replaced.items():
            extras[f"replaced_{name}"] = flags
        return Rollout(
            obs=prompts,
            actions=sample.actions,
            mask=torch.ones(S, B, A, dtype=torch.bool),
            behavior_logp=sample.behavior_logp,
            true_behavior_logp=sample.true_logp,
            rewards=rewards,
            group=self.group_ids(),
            version=torch.full((S, B, A), int(version), dtype=torch.long),
            extras=extras,
        )

    # ------------------------------------------------------------------ learner
    def answer_logp(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor) -> Tensor:
        return self.model.answer_logp(params, prompts, answers, share_prompts=self.share_prompts)

    def learner_terms(self, params, rollout, advantage: Advantage, generator, recompute_proximal):
        prompts = rollout.obs
        if self.backward == "screened":  # score without gradients; objective() recomputes the kept rows
            with torch.no_grad():
                logp = self.answer_logp(params, prompts, rollout.actions)
        else:
            logp = self.answer_logp(params, prompts, rollout.actions)
        adv = compute_advantages(advantage, rollout.rewards, rollout.group, self.problem,
                                 rho=lambda: torch.exp((logp.detach() - rollout.behavior_logp).sum(-1)))
        target = None
        if self.with_target:
            target = self.answer_logp(params, prompts, rollout.extras["correct"])
        return PGTerms(
            logp=logp,
            advantages=adv,
            mask=rollout.mask,
            behavior_logp=rollout.behavior_logp,
            proximal_logp=logp.detach() if recompute_proximal else None,
            group=rollout.group,
            target_logp=target,
            generator=generator,
        )

    def objective(self, estimator, terms, rollout, params=None):
        if self.backward == "full":
            return estimator(terms)
        if not isinstance(estimator, Kondo):
            raise ValueError(f"backward='screened' needs the kondo estimator, got {estimator.name!r}")
        if params is None:
            raise ValueError("backward='screened' needs params: it recomputes the kept rows with gradients")
        return screened_kondo(self, estimator, terms, rollout, params)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, params, generator):
        """``error`` (see the module docstring), mean ``reward`` and ``exact`` (the rate of fully
        correct answers), each ``[S]``; from a fresh sampled batch or, with ``eval_mode='exact'``,
        the exact expectation over every prompt and answer."""
        params = [p.detach() for p in params]
        if self.eval_mode == "exact":
            return self.exact_evaluation(params)
        prompts = self.sample_prompts(self.eval_prompts, generator)
        M = self.eval_samples
        with torch.no_grad():
            out = self.model.sample(params, prompts, M, self.answer_len, generator)
        rows = prompts.repeat_interleave(M, dim=1)
        rewards = self.rewards(rows, out.actions)
        exact = (out.actions == self.correct_answers(rows)).all(-1) if self.problem != "subsequence_match" \
            else is_subsequence(rows, out.actions)
        return {"error": self.error(rewards), "reward": rewards.mean(-1),
                "exact": exact.to(rewards.dtype).mean(-1)}

    def exact_evaluation(self, params: Sequence[Tensor]) -> dict[str, Tensor]:
        """E[R] under the learner for uniform prompts, by enumerating all V^P prompts and V^A answers."""
        S, P, A, V = self.population, self.prompt_len, self.answer_len, self.vocab
        prompts, answers = all_sequences(P, V), all_sequences(A, V)
        n_p, n_a = prompts.shape[0], answers.shape[0]
        with torch.no_grad():
            logp = self.model.answer_logp(params, prompts.expand(S, n_p, P), answers.repeat(n_p, 1).expand(S, -1, A))
        probs = logp.sum(-1).exp().reshape(S, n_p, n_a)
        rows = prompts.repeat_interleave(n_a, 0)
        rewards = self.rewards(rows, answers.repeat(n_p, 1)).reshape(n_p, n_a).to(probs.dtype)
        correct = (answers.repeat(n_p, 1) == self.correct_answers(rows)).all(-1).reshape(n_p, n_a)
        expected = (probs * rewards).sum(-1)  # [S, n_p]
        return {"error": self.error(expected), "reward": expected.mean(-1),
                "exact": (probs * correct.to(probs.dtype)).sum(-1).mean(-1)}


def all_sequences(length: int, vocab: int) -> Tensor:
    """Every sequence of ``length`` tokens over ``vocab``, ``[vocab^length, length]`` (lexicographic)."""
    digits = torch.arange(vocab ** length).unsqueeze(-1) // vocab ** torch.arange(length - 1, -1, -1)
    return digits % vocab


class _FixedProblem(SequenceTask):
    """A sequence task registered under its problem's name: ``make_task("reverse_copy", H=5)``."""

    def __post_init__(self) -> None:
        fixed = type(self).__dataclass_fields__["problem"].default
        if self.problem != fixed:
            raise ValueError(f"task {fixed!r} has problem={fixed!r}, got {self.problem!r}")
        super().__post_init__()


@register_task("reverse_copy")
@dataclass
class ReverseCopyTask(_FixedProblem):
    problem: str = "reverse_copy"


@register_task("bit_parity")
@dataclass
class BitParityTask(_FixedProblem):
    problem: str = "bit_parity"


@register_task("key_value")
@dataclass
class KeyValueTask(_FixedProblem):
    problem: str = "key_value"


@register_task("subsequence_match")
@dataclass
class SubsequenceMatchTask(_FixedProblem):
    problem: str = "subsequence_match"


def screened_kondo(task: SequenceTask, estimator: Kondo, terms, rollout: Rollout, params: Sequence[Tensor]) -> EstimatorOutput:
    """Kondo with a real saving: the keep mask comes from the no-grad scores in ``terms``; only the
    rows that hold a kept token with a nonzero advantage run the differentiable forward (and so
    the backward) — the others contribute exactly zero.

    Population members keep different numbers of rows; each runs ``max_s n_s`` rows (its kept rows
    first, padded with unkept rows whose loss weight is 0). The loss is Kondo's: −Σ_kept A·log π_θ
    aggregated over the valid tokens — the same value and gradient as the unscreened estimator."""
    keep = estimator.keep_mask(terms)  # [S, B, T] (one draw for priority='uniform', as unscreened)
    # a kept token with A = 0 contributes exactly 0 to the loss and its gradient: no backward for it
    rows = (keep & (terms.token_advantages != 0)).any(-1)  # [S, B]
    S, B, T = keep.shape
    n = max(int(rows.sum(-1).max()), 1)
    order = torch.sort((~rows).to(torch.int8), dim=-1, stable=True).indices[:, :n]  # kept rows first
    row_groups = rollout.group if rollout.group.ndim == 2 else rollout.group.expand(S, B)
    prompts = rollout.obs  # [S, G, P]; only the prompts of kept rows run, each once
    G = prompts.shape[1]
    used = torch.zeros(S, G, dtype=torch.long).scatter_add(1, row_groups, rows.long()) > 0
    n_g = max(int(used.sum(-1).max()), 1)
    g_order = torch.sort((~used).to(torch.int8), dim=-1, stable=True).indices[:, :n_g]
    position = torch.zeros(S, G, dtype=torch.long).scatter(1, g_order, torch.arange(n_g).expand(S, n_g))
    sub_prompts = prompts.gather(1, g_order.unsqueeze(-1).expand(S, n_g, prompts.shape[-1]))
    groups = position.gather(1, row_groups.gather(1, order))
    sub_actions = rollout.actions.gather(1, order.unsqueeze(-1).expand(S, n, T))
    sub_logp = task.model.answer_logp(params, sub_prompts, sub_actions, groups=groups)
    logp = terms.logp.detach().scatter(1, order.unsqueeze(-1).expand(S, n, T), sub_logp)
    values = -terms.token_advantages * logp * keep.to(logp.dtype)
    loss = aggregate(values, terms.valid, estimator.aggregation).sum()
    metrics = {
        "kept_frac": masked_mean(keep.to(logp.dtype), terms.valid),
        "kept_rows_frac": masked_mean(keep.any(-1).to(logp.dtype), terms.valid.any(-1), dims=(-1,)),
        "backward_rows_frac": torch.full((S,), n / B, dtype=logp.dtype),
    }
    return EstimatorOutput(loss=loss, metrics=estimator.diagnostics(terms, TokenLoss(values.detach(), metrics=metrics)))


__all__ = ["DEFAULT_VOCAB", "all_sequences", "TASK_NAMES", "BitParityTask", "KeyValueTask", "ReverseCopyTask", "SequenceTask",
           "SubsequenceMatchTask", "is_subsequence", "key_value_labels", "parity_labels",
           "reversal_reward", "reversal_targets", "screened_kondo"]
