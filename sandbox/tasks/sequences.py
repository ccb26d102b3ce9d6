"""The transformer sequence tasks: a problem of ``sandbox.envs.sequences`` learnt by the tiny
transformer of ``sandbox.policies.transformer`` (shared/spec/environments.md, "Synthetic transformer
sequence tasks"; the token-reversal task of "Delightful Policy Gradient", arXiv 2603.14608).

The task is the generic ``Task``: a ``SequenceEnvironment`` (``sandbox.envs.sequences.environment``:
the batch layout, the training-prompt options, the error and the exact sequence error) × the
transformer policy (``sandbox.policies.transformer_policy``) or any registered family that reads
token prompts (``policy``, or the older ``policy_family``) × the objective of ``objective`` (or the
older ``backward``): ``sandbox.tasks.compose``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.envs.sequences import SEQUENCE_ENVS, WRONG_ANSWERS, SequenceEnv, all_sequences
from sandbox.envs.sequences.environment import SEQ_ERROR_PROMPTS, SequenceEnvironment
from sandbox.envs.sequences.scale import at_scale
from sandbox.frictions.base import FrictionStack
from sandbox.policies.base import Policy
from sandbox.policies.transformer import Transformer
from sandbox.policies.transformer_policy import TransformerPolicy
from sandbox.tasks.base import Task, register_task
from sandbox.tasks.compose import choose_objective, choose_policy, chosen

EXACT_EVAL_LIMIT = 1 << 14  # most (prompt, answer) pairs that eval_mode='exact' enumerates


@dataclass
class TransformerSequenceTask(Task):
    """A sequence environment (``problem``, one of ``SEQUENCE_ENVS``) × the tiny transformer policy
    (or the registered policy ``policy_family``) × the objective of ``backward``. The environment's
    knobs are fields of the task composed for it (``sequence_task``): this class holds the policy's,
    the sampler's, the evaluation's and the learner's, and builds the three parts from them.

    Defaults are the spec's: H = 10, V per problem (2, 2, 10, 5), 10 prompts × 10 samples per step.
    ``backward='screened'`` runs Kondo screening for real: the learner scores the batch with a
    no-grad forward, and the objective runs the differentiable forward and backward only on the
    rows that hold a kept token with a nonzero advantage (needs an estimator that screens rows).
    """

    default_lr = 3e-4  # the reference launcher's Adam step (google-deepmind/egg)
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
    policy_family: str = "transformer"  # the older name of ``policy`` (kept: stored runs name it)
    policy_kwargs: dict = field(default_factory=dict)  # its knobs, for a family other than the transformer's
    policy: str = "transformer"  # a registered family that reads token prompts (``sandbox.policies.base.POLICIES``)
    objective: str = "plain"  # 'plain' | 'screened' (the same as backward='screened')
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
        self.prompt_len, self.answer_len = self.env.prompt_len, self.env.answer_len
        self.reward_range = self.env.reward_range
        self.model = Transformer(vocab=self.vocab, context=self.prompt_len + self.answer_len, width=self.width,
                                 heads=self.heads, layers=self.layers, mlp=self.mlp, init_std=self.init_std,
                                 variant=self.variant)
        self.policy_key = "policy" if self.policy != "transformer" else "policy_family"
        self.policy_name = chosen("policy", self.policy, "transformer", "policy_family", self.policy_family,
                                  "transformer")
        objective = chosen("objective", self.objective, "plain", "backward",
                           "screened" if self.backward == "screened" else "plain", "plain")
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
        self.environment = SequenceEnvironment(
            self.env, self.population, self.prompts_per_step, self.samples_per_prompt, self.n_prompts, self.p_easy,
            self.wrong_answer, self.with_target, self.torch_dtype, self.eval_prompts, self.eval_samples,
            self.eval_mode, self.seq_error)
        self.policy = self.build_policy()
        self.objective = choose_objective(self, objective, self.environment.spec, self.policy)

    def build_policy(self) -> Policy:
        """The policy ``policy`` (or ``policy_family``) names: the transformer of the task's knobs (width,
        layers …), or a registered family that reads token prompts, built from the environment's spec
        (``from_spec``: by default ``cls(vocab=, prompt_len=, answer_len=, dtype=, **policy_kwargs)``)."""
        policy = choose_policy(self, self.policy_name, self.environment.spec, "transformer",
                               lambda: TransformerPolicy(self.model, self.torch_dtype, self.share_prompts),
                               key=self.policy_key)
        if policy.temperature != 1.0:  # the task's temperature knob is the sampler's τ_s (sandbox.policies.base)
            raise ValueError(f"policy_kwargs: a sequence task's policy has temperature 1 (the task's temperature "
                             f"is the sampler's), got {policy.temperature}")
        return policy

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

    def work(self) -> float:
        """2 FLOP per parameter and token for the actor's decoding, 6 for the learner's pass (the
        transformer rule), over a step's batch; attention and evaluation left out (a lower bound)."""
        return 8.0 * self.population * self.batch_size * (self.prompt_len + self.answer_len) * self.model.n_params()

    def rewards(self, prompts: Tensor, answers: Tensor) -> Tensor:
        """Rewards ``[S, B]`` of answers ``[S, B, A]`` to their row prompts ``[S, B, P]``."""
        return self.environment.rewards(prompts, answers)


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

__all__ = ["BUILT_IN", "EXACT_EVAL_LIMIT", "SEQ_ERROR_PROMPTS", "SequenceTask", "TransformerSequenceTask", "all_sequences", "env_knobs",
           "register_sequence_env", "sequence_task"]
