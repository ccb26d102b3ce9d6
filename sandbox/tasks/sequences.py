"""The transformer sequence tasks: a problem of ``sandbox.envs.sequences`` learnt by the tiny
transformer of ``sandbox.policies.transformer`` (shared/spec/environments.md, "Synthetic transformer
sequence tasks"; the token-reversal task of "Delightful Policy Gradient", arXiv 2603.14608).

Each step draws ``prompts_per_step`` prompts and ``samples_per_prompt`` answers to each; rows are
grouped by prompt (row g·M + m answers prompt g) and the group is the baseline's group. Options
``n_prompts`` (a fixed pool of n prompts per seed, drawn with replacement each step) and ``p_easy``
(each training prompt is all zeros with probability p) shape the training prompts only.

Error: from a fresh batch of prompts of the full distribution, sampled by the **current** learner
(temperature 1, no ε, no friction), 1 − mean R for rewards in [0, 1] and (1 − mean R)/2 (the
fraction of wrong answers) for ±1 rewards, so that 0 is perfect in every problem.

Sequence error (``seq_error=True``; P1 reports it for token reversal): the probability that an
answer sampled by the learner is not entirely right, 1 − E_x π(y*|x), computed *exactly* per prompt
by teacher-forcing its one correct answer y* — over all V^P prompts when there are at most
``SEQ_ERROR_PROMPTS`` of them (H = 10, V = 2: 1,024), else over that many prompts drawn once from a
fixed generator. No sampling noise, so it resolves 10⁻⁴ and below (per-position error at H = 10 on
1,000 sampled answers resolves 10⁻³ at best).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.sampling import IDENTITY
from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.envs.sequences import SEQUENCE_ENVS, WRONG_ANSWERS, SequenceEnv, all_sequences
from sandbox.envs.sequences.scale import at_scale
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.objectives import PLAIN, ScreenedBackward
from sandbox.policies.decode import Versions, teacher_forced
from sandbox.policies.transformer import Transformer
from sandbox.tasks.base import Batch, PolicySample, Scored, Task, register_task

EXACT_EVAL_LIMIT = 1 << 14  # most (prompt, answer) pairs that eval_mode='exact' enumerates
SEQ_ERROR_PROMPTS = 1 << 12  # most prompts the sequence error enumerates; a fixed sample beyond


@dataclass
class TransformerSequenceTask(Task):
    """A sequence environment (``problem``, one of ``SEQUENCE_ENVS``) × the tiny transformer policy
    × the objective of ``backward``. The environment's knobs are fields of the task composed for it
    (``sequence_task``): this class holds the policy's, the sampler's, the evaluation's and the learner's.

    Defaults are the spec's: H = 10, V per problem (2, 2, 10, 5), 10 prompts × 10 samples per step.
    ``backward='screened'`` runs Kondo screening for real: the learner scores the batch with a
    no-grad forward, and the objective runs the differentiable forward and backward only on the
    rows that hold a kept token with a nonzero advantage (needs an estimator that screens rows).
    """

    default_lr = 3e-4  # the reference launcher's Adam step (google-deepmind/egg)
    resumable: ClassVar[bool] = True  # partial rollouts: each position decoded by its version
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    #: the environments whose knobs are this task's fields: each is validated, ``problem`` is built
    envs: ClassVar[tuple[type[SequenceEnv], ...]] = ()

    problem: str = "reverse_copy"  # a registered sequence environment (``SEQUENCE_ENVS``)
    V: int = 0  # vocabulary; 0 = the problem's default (2, 2, 10, 5)
    wrong_answer: str = "constant"  # landmine's fixed wrong answer: 'constant' (all 0, the reference's) | 'shifted'
    think: int = 0  # free tokens before the problem's answer, ≥ 0 (length knob: sandbox.envs.sequences.scale)
    problem_V: int = 0  # the problem's vocabulary K < V when the model's is larger: token a answers a mod K; 0 = V
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
    seq_error: bool = False  # also log the exact sequence error 1 − E_x π(y*|x) (module docstring)
    share_prompts: bool = True  # learner fast path: each group's prompt is run once
    backward: str = "full"  # 'full' | 'screened' (Kondo: backward only on rows with a kept token)
    with_target: bool = False  # also score the correct answer (target_logp, for the xent oracle)
    dtype: str = "float32"  # 'float32' | 'float64'
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        check_choice("problem", self.problem, tuple(SEQUENCE_ENVS.names()))
        check_int("V", self.V, low=0)
        check_choice("wrong_answer", self.wrong_answer, WRONG_ANSWERS)
        for name in ("prompts_per_step", "samples_per_prompt", "population", "eval_prompts", "eval_samples"):
            check_int(name, getattr(self, name), low=1)
        check_int("n_prompts", self.n_prompts, low=0)
        check_range("p_easy", self.p_easy, low=0.0, high=1.0)
        check_range("temperature", self.temperature, low=0.0, low_open=True)
        check_range("eps_mix", self.eps_mix, low=0.0, high=1.0)
        check_choice("eval_mode", self.eval_mode, ("sampled", "exact"))
        check_choice("backward", self.backward, ("full", "screened"))
        check_choice("dtype", self.dtype, ("float32", "float64"))
        env_cls = SEQUENCE_ENVS.get(self.problem)
        self.vocab = self.V or env_cls.default_vocab
        check_range("V", self.vocab, low=2)
        knobs = lambda cls: {f.name: getattr(self, f.name) for f in env_knobs(cls) if hasattr(self, f.name)}  # noqa: E731
        for other in type(self).envs:  # every knob is valid, even those of the other problems
            if other is not env_cls:
                other(vocab=other.default_vocab, **knobs(other))
        check_int("problem_V", self.problem_V, low=0)
        if self.problem_V and not 2 <= self.problem_V < self.vocab:
            raise ValueError(f"problem_V must be 0 (the model's V) or in [2, V) = [2, {self.vocab}), got {self.problem_V}")
        problem = env_cls(vocab=self.problem_V or self.vocab, **knobs(env_cls))
        self.env: SequenceEnv = at_scale(problem, self.vocab, self.think)  # the problem itself when both are 0
        self.n_actions = self.vocab
        self.prompt_len, self.answer_len = self.env.prompt_len, self.env.answer_len
        self.reward_range = self.env.reward_range
        self.model = Transformer(vocab=self.vocab, context=self.prompt_len + self.answer_len, width=self.width,
                                 heads=self.heads, layers=self.layers, mlp=self.mlp, init_std=self.init_std,
                                 variant=self.variant)
        self.objective = ScreenedBackward(self.model.answer_logp) if self.backward == "screened" else PLAIN
        #: the evaluation the knob chose, once: a fresh sampled batch or the exact enumeration
        self.evaluation = self.exact_evaluation if self.eval_mode == "exact" else self.sampled_evaluation
        if self.eval_mode == "exact":
            if not self.env.uniform_prompts:
                raise ValueError(f"eval_mode='exact' enumerates uniform prompts: reverse_copy or bit_parity, "
                                 f"got problem={self.problem!r}")
            n = self.vocab ** (self.prompt_len + self.answer_len)
            if n > EXACT_EVAL_LIMIT:
                raise ValueError(f"eval_mode='exact' would score V^(P+A) = {n} sequences (limit {EXACT_EVAL_LIMIT}); "
                                 "use eval_mode='sampled'")
        if self.seq_error and not self.env.unique_answer:
            raise ValueError(f"seq_error=True needs one correct answer per prompt; {self.problem!r} has many")
        self._pool: Tensor | None = None
        self._seq_prompts: Tensor | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    def memory(self) -> tuple[int, int]:
        """The transformers [S, n_params]; the larger of a learner step's activations kept for the
        backward pass (residual, attention, MLP and attention scores per token and layer, logits)
        and an evaluation batch's largest layer (no gradient)."""
        size, T = self.torch_dtype.itemsize, self.prompt_len + self.answer_len
        layer = 4 * self.width + self.mlp + self.heads * T
        learner = self.batch_size * (self.layers * 2 * layer + 2 * self.vocab)
        evaluation = self.eval_prompts * self.eval_samples * (layer + self.vocab)
        return self.population * self.model.n_params() * size, self.population * T * max(learner, evaluation) * size

    # ------------------------------------------------------------------ environment
    def training_prompts(self, n: int, generator: torch.Generator) -> Tensor:
        """Training prompts: from the finite pool (if any), all zeros with probability ``p_easy``."""
        if self._pool is not None:
            idx = torch.randint(0, self.n_prompts, (self.population, n), generator=generator)
            prompts = self._pool.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.prompt_len))
        else:
            prompts = self.env.sample_prompts(self.population, n, generator)
        if self.p_easy > 0:
            easy = torch.rand(self.population, n, 1, generator=generator) < self.p_easy
            prompts = torch.where(easy, torch.zeros_like(prompts), prompts)
        return prompts

    def rewards(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Rewards ``[S, B]`` of answers ``[S, B, A]`` to their row prompts ``[S, B, P]``."""
        return self.env.rewards(prompts, answers).to(self.torch_dtype)

    def init_params(self, generator):
        params = self.model.init(self.population, generator, self.torch_dtype)
        if self.n_prompts:
            self._pool = self.env.sample_prompts(self.population, self.n_prompts, generator)
        return params

    def state_dict(self):
        return {"_pool": self._pool}

    def draw_batch(self, generator):
        G, M = self.prompts_per_step, self.samples_per_prompt
        prompts = self.training_prompts(G, generator).to(self.device)  # [S, G, P]
        return Batch(obs=prompts, rows=prompts.repeat_interleave(M, dim=1),
                     group=torch.arange(G, device=self.device).repeat_interleave(M))

    def friction_context(self, batch, seed):
        return FrictionContext(n_actions=self.vocab, reward_range=self.reward_range,
                               correct_actions=self.env.correct_answers(batch.rows),
                               wrong_actions=self.env.wrong_answers(batch.rows, self.wrong_answer), seed=seed)

    def reward(self, batch, actions, generator):
        return self.rewards(batch.rows, actions)

    # ------------------------------------------------------------------ policy
    def sample(self, params, batch, chain, generator, versions=None):
        resumed = versions is not None  # decoded teacher-forced: a KV cache holds one version's keys
        versions = versions if resumed else Versions.single(params, self.answer_len)
        out = self.model.sample(params, batch.obs, self.samples_per_prompt, self.answer_len, generator, chain=chain,
                                cache=not resumed, versions=versions)
        forced = lambda p, actions: chain.distribution(self.model.answer_logits(p, batch.obs, actions))[0]  # noqa: E731
        return PolicySample(out.actions, out.logp, teacher_forced(forced, versions, out))

    def rollout_extras(self, batch, ctx, actor_params, params, sample):
        return {"correct": ctx.correct_actions} if (self.frictions or self.with_target) else {}

    # ------------------------------------------------------------------ learner
    def answer_logp(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor) -> Tensor:
        return self.model.answer_logp(params, prompts, answers, share_prompts=self.share_prompts)

    def score(self, params, rollout, grad=True):
        # screened backward scores without gradients; the objective recomputes the kept rows
        with torch.set_grad_enabled(grad and not self.objective.rescores and torch.is_grad_enabled()):
            logp = self.answer_logp(params, rollout.obs, rollout.actions)
        target = self.answer_logp(params, rollout.obs, rollout.extras["correct"]) if self.with_target else None
        return Scored(logp=logp, target_logp=target)

    def token_logits(self, params, rollout):
        with torch.no_grad():
            return self.model.answer_logits([p.detach() for p in params], rollout.obs, rollout.actions)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, params, generator):
        """``error`` (see the module docstring), mean ``reward`` and ``exact`` (the rate of fully
        correct answers), each ``[S]``; from a fresh sampled batch or, with ``eval_mode='exact'``,
        the exact expectation over every prompt and answer."""
        params = [p.detach() for p in params]
        metrics = self.evaluation(params, generator)
        if self.seq_error:
            metrics["seq_error"] = self.sequence_error(params)
        return metrics

    def sampled_evaluation(self, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """The metrics of ``eval_prompts`` fresh prompts × ``eval_samples`` answers sampled by the learner."""
        prompts = self.env.sample_prompts(self.population, self.eval_prompts, generator).to(self.device)
        M = self.eval_samples
        with torch.no_grad():
            out = self.model.sample(params, prompts, M, self.answer_len, generator, chain=IDENTITY)
        rows = prompts.repeat_interleave(M, dim=1)
        rewards = self.rewards(rows, out.actions)
        exact = self.env.fully_correct(rows, out.actions)
        return {"error": self.env.error(rewards), "reward": rewards.mean(-1), "exact": exact.to(rewards.dtype).mean(-1)}

    def sequence_error(self, params: Sequence[Tensor]) -> Tensor:
        """``[S]``: 1 − E_x π(y*|x) over every prompt (or a fixed sample of ``SEQ_ERROR_PROMPTS``),
        exact per prompt — the learner's probability of answering it entirely right, teacher-forced."""
        if self._seq_prompts is None:
            if self.env.uniform_prompts and self.vocab ** self.prompt_len <= SEQ_ERROR_PROMPTS:
                self._seq_prompts = all_sequences(self.prompt_len, self.vocab)
            else:
                fixed = torch.Generator().manual_seed(0)  # the same prompts at every step and seed
                self._seq_prompts = self.env.sample_prompts(1, SEQ_ERROR_PROMPTS, fixed)[0]
        prompts = self._seq_prompts.to(self.device).expand(self.population, -1, -1)
        with torch.no_grad():
            logp = self.model.answer_logp(params, prompts, self.env.correct_answers(prompts))
        return 1 - logp.to(torch.float64).sum(-1).exp().mean(-1).to(logp.dtype)

    def exact_evaluation(self, params: Sequence[Tensor], generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """E[R] under the learner for uniform prompts, by enumerating all V^P prompts and V^A answers."""
        S, P, A, V = self.population, self.prompt_len, self.answer_len, self.vocab
        prompts, answers = all_sequences(P, V).to(self.device), all_sequences(A, V).to(self.device)
        n_p, n_a = prompts.shape[0], answers.shape[0]
        with torch.no_grad():
            logp = self.model.answer_logp(params, prompts.expand(S, n_p, P), answers.repeat(n_p, 1).expand(S, -1, A))
        probs = logp.sum(-1).exp().reshape(S, n_p, n_a)
        rows = prompts.repeat_interleave(n_a, 0)
        rewards = self.rewards(rows, answers.repeat(n_p, 1)).reshape(n_p, n_a).to(probs.dtype)
        correct = self.env.fully_correct(rows, answers.repeat(n_p, 1)).reshape(n_p, n_a)
        expected = (probs * rewards).sum(-1)  # [S, n_p]
        return {"error": self.env.error(expected), "reward": expected.mean(-1),
                "exact": (probs * correct.to(probs.dtype)).sum(-1).mean(-1)}


def env_knobs(env: type[SequenceEnv]) -> list[dataclasses.Field]:
    """The knobs of a sequence environment: its dataclass fields but the vocabulary (the task's ``V``)."""
    return [f for f in dataclasses.fields(env) if f.name != "vocab"]


def sequence_task(name: str, envs: Sequence[type[SequenceEnv]], problem: str | None = None,
                  class_name: str = "") -> type[TransformerSequenceTask]:
    """The task class of ``envs`` × the transformer: ``TransformerSequenceTask``'s fields plus every
    knob of ``envs`` (the first environment's default where two share a knob), registered as
    ``name``. With ``problem`` the task is that problem's (``make_task("reverse_copy", H=5)``);
    without, ``problem`` is a knob (``make_task("sequences", problem="key_value")``)."""
    own = {f.name for f in dataclasses.fields(TransformerSequenceTask)}
    knobs: dict[str, tuple] = {}
    for env in envs:
        for f in env_knobs(env):
            if f.name in own:
                raise ValueError(f"sequence environment {env.__name__}: knob {f.name!r} is a field of the task; rename it")
            default = field(default=f.default) if f.default is not dataclasses.MISSING else \
                field(default_factory=f.default_factory)
            knobs.setdefault(f.name, (f.name, f.type, default))
    if problem is not None:
        knobs["problem"] = ("problem", str, field(default=problem))
    class_name = class_name or "".join(w.title() for w in name.split("_")) + "Task"
    cls = dataclasses.make_dataclass(class_name, list(knobs.values()),
                                     bases=(TransformerSequenceTask,), namespace={"envs": tuple(envs)})
    cls.__doc__ = f"The {name!r} sequence task: {TransformerSequenceTask.__doc__.splitlines()[0]}"
    if problem is not None:
        original = cls.__post_init__

        def __post_init__(self) -> None:
            if self.problem != problem:
                raise ValueError(f"task {problem!r} has problem={problem!r}, got {self.problem!r}")
            original(self)

        cls.__post_init__ = __post_init__
    return register_task(name)(cls)


def register_sequence_env(name: str):
    """Class decorator: register a ``SequenceEnv`` dataclass as sequence problem ``name`` and the
    task that learns it with the transformer, ``make_task(name, **knobs)`` (the README's "Add an
    environment")."""
    def decorator(env: type[SequenceEnv]) -> type[SequenceEnv]:
        SEQUENCE_ENVS.register(name)(env)
        sequence_task(name, (env,), problem=name)
        return env

    return decorator


#: the built-in problems (``sandbox.envs.sequences``); their tasks keep every built-in knob
BUILT_IN = tuple(SEQUENCE_ENVS.get(name) for name in SEQUENCE_ENVS.names())
SequenceTask = sequence_task("sequences", BUILT_IN, class_name="SequenceTask")
for _env in BUILT_IN:
    sequence_task(_env.name, BUILT_IN, problem=_env.name)

__all__ = ["BUILT_IN", "EXACT_EVAL_LIMIT", "SequenceTask", "TransformerSequenceTask", "all_sequences", "env_knobs",
           "register_sequence_env", "sequence_task"]
