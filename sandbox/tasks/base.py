"""A task is ``Task(environment, policy, objective)``: an ``Environment`` (``sandbox.envs.base``) ×
a ``Policy`` (``sandbox.policies.base``) × the loss the learner differentiates
(``sandbox.objectives``), in functional form over population parameters ``[S, ...]`` (S seeds
train as one batched computation).

The runtime owns everything else. Its one actor (``sandbox.runtime.actor``) asks the task for a
batch of contexts, the policy's samples under the friction stack's sampling chain and the rewards;
its one learner (``sandbox.runtime.learner``) asks the task to score a rollout under the learner's
parameters and builds ``PGTerms``. ``Task`` writes each of these calls once, for every family:

    draw_batch → friction_context → sample (policy + chain) → reward      (actor side)
    score → (the learner: terms → objective) → evaluate / update_diagnostics   (learner side)

A registered task (``register_task``) is a dataclass of knobs whose ``__post_init__`` validates
them and builds ``environment``, ``policy`` and ``objective``; it overrides none of the calls.
"""

from __future__ import annotations

import dataclasses
import math
import os
from abc import ABC
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from sandbox.core.plugins import entry_points_of
from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.core.sampling import SamplingChain
from sandbox.core.validation import check_memory, gib
from sandbox.core.versions import Versions
from sandbox.envs.base import Batch, Environment
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.frictions.precision import k3_kl
from sandbox.objectives import PLAIN, Objective
from sandbox.policies.base import Policy, PolicySample, Scored

TASKS: Registry[Task] = Registry("task")


def register_task(name: str, *, replace: bool = False):
    return TASKS.register(name, replace=replace)


def load_tasks(name: str | None = None) -> None:
    """Import the modules that register tasks: the ``sandbox.tasks`` entry points (pyproject.toml),
    in their order, imported on first use; with ``name``, only until one has registered it (a
    bandit run imports no sequence, text or regime module), all of them when none does."""
    for entry in entry_points_of("sandbox.tasks").values():
        if name is not None and name in TASKS:
            return
        entry.load()


TASKS.load_builtins = load_tasks  # a plugin's task is judged against every built-in task name


def make_task(name: str, **kwargs) -> Task:
    """``make_task("bandit", K=100, batch_size=100, population=10)``; sizes that cannot fit in
    memory are refused here, before anything is allocated (``check_task_memory``)."""
    if name not in TASKS:
        load_tasks(name)
    task = TASKS.make(name, **kwargs)
    check_task_memory(task)
    return task


#: copies of the parameters a step holds: the values, their gradients, Adam's two moments, the actor's
PARAMETER_COPIES = 5


def check_task_memory(task: Task, param_snapshots: int = 0, batch_snapshots: int = 0, why: str = "") -> None:
    """Refuse a task whose sizes cannot fit in this machine's memory, naming its sizes that differ
    from the defaults and the estimate (``Task.memory``); ``param_snapshots``/``batch_snapshots``:
    stale copies a run keeps besides (``why`` says which setting keeps them)."""
    params, batch = task.memory()
    need = params * (PARAMETER_COPIES + param_snapshots) + batch * (1 + batch_snapshots)
    if not need:
        return
    given = _given(task)
    what = f"task {task.name!r}" + (f" with {', '.join(given)}" if given else "") + (f" and {why}" if why else "")
    check_memory(what, need, f"parameters {gib(params)} × {PARAMETER_COPIES + param_snapshots} copies (values, "
                             f"gradients, Adam's moments, actor{', stale snapshots' if param_snapshots else ''}), "
                             f"a step's batch {gib(batch)}" + (f" × {1 + batch_snapshots}" if batch_snapshots else ""))


#: the lower bound of a learner step's time: ~20 torch operations (sampling, scoring, loss,
#: backward, optimiser) at ≥ 5 µs each, on any device (a bandit step measures 1-3 ms here)
STEP_SECONDS = 1e-4
#: floating-point operations per second no device sustains on these kernels: per CPU core (a core's
#: fp32 FMA peak with AVX-512 is ~1.9e11), and for a GPU (an H200's dense bf16 peak is ~1e15)
FLOPS = {"cpu": 2e11, "cuda": 1e15}
#: the time a run may take before it is refused: ``$SANDBOX_MAX_RUN_HOURS`` (default a week)
MAX_HOURS_ENV, DEFAULT_MAX_HOURS = "SANDBOX_MAX_RUN_HOURS", 168.0


def run_seconds(task: Task, steps: int, device: str = "cpu") -> float:
    """A lower bound of a run's time: ``steps`` × max(``STEP_SECONDS``, ``Task.work()`` / the
    device's ``FLOPS`` (× every core on the CPU)). A lower bound, so that a run refused for its time
    could not have finished within the limit on any machine of the kind."""
    kind = device.split(":")[0]
    rate = FLOPS.get(kind, FLOPS["cuda"]) * ((os.cpu_count() or 1) if kind == "cpu" else 1)
    return steps * max(STEP_SECONDS, task.work() / rate)


def max_run_hours() -> float:
    raw = os.environ.get(MAX_HOURS_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_MAX_HOURS
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"${MAX_HOURS_ENV} must be a number of hours > 0, got {raw!r}")
    return value


def check_task_time(task: Task, steps: int, device: str = "cpu") -> None:
    """Refuse, before any step, a run whose time's lower bound (``run_seconds``) exceeds
    ``max_run_hours()``, in one line naming ``steps`` and the task's sizes and the estimate."""
    seconds, limit = run_seconds(task, steps, device), max_run_hours()
    if seconds <= limit * 3600:
        return
    given = _given(task)
    raise ValueError(f"steps {steps} of task {task.name!r}" + (f" with {', '.join(given)}" if given else "")
                     + f" would take at least {_hours(seconds / 3600)} h (steps × max({STEP_SECONDS:g} s, "
                     f"{task.work():.3g} FLOP per step / {FLOPS.get(device.split(':')[0], FLOPS['cuda']):.0e} FLOP/s"
                     f"{' per core' if device.startswith('cpu') else ''})), more than ${MAX_HOURS_ENV} = {limit:g} h; "
                     "use fewer steps or smaller sizes")


def _hours(h: float) -> str:
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def _given(task: Task) -> list[str]:
    """The task's integer sizes that differ from their defaults, as 'name=value'."""
    return [f"{f.name}={getattr(task, f.name)}" for f in dataclasses.fields(task)
            if isinstance(getattr(task, f.name), int) and f.default is not dataclasses.MISSING
            and getattr(task, f.name) != f.default]


class Task(ABC):
    """``Task(environment, policy, objective)``: the actor's and the learner's calls, written once.

    ``environment`` is an ``Environment`` (``sandbox.envs.base``), ``policy`` a ``Policy``
    (``sandbox.policies.base``) and ``objective`` the loss the learner differentiates
    (``sandbox.objectives``). A registered task is a dataclass of knobs whose ``__post_init__``
    builds the three parts (and an optional ``diagnostics`` hook); it overrides none of the calls
    below (``tests/test_layers.py`` checks it). (An ``ABC`` without abstract methods: the classes
    ``sequence_task`` makes keep the module ``abc`` their fingerprints were stamped with.)
    """

    population: int = 1
    frictions: FrictionStack = FrictionStack()
    environment: Environment
    policy: Policy
    #: the loss the learner differentiates (``sandbox.objectives``), chosen from the task's knobs
    #: (``mode='exact'``, ``backward='screened'``) when it is built
    objective: Objective = PLAIN
    #: the actor's chain samples at this temperature, τ·τ_s (the policy's τ times any sampler
    #: mismatch τ_s: ``sandbox.policies.base``), and ε (fields of tasks that expose them)
    temperature: float = 1.0
    eps_mix: float = 0.0
    #: μ given to the learner: 'reported' | 'true' (what the actor really sampled from)
    behavior: str = "reported"
    #: ``diagnostics(task, params, rollout, grad, terms_of) → {name: [S]}`` at logged steps
    diagnostics: Callable[..., dict[str, Tensor]] | None = None
    #: learner settings that learn on this task (``RunConfig`` uses them unless told otherwise)
    default_advantage: ClassVar[str] = "group_mean"
    default_optimizer: ClassVar[str] = "adam"
    default_lr: ClassVar[float] = 1e-3
    #: the device types its tensors may live on (``RunConfig.device``)
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: its seeds cannot share one batched model: ``sandbox run --seeds N`` makes N runs, not a population
    one_model_per_run: ClassVar[bool] = False
    #: the ``policy`` and ``objective`` names the task was made with (``sandbox.tasks.compose``; ``knobs``)
    given_names: dict[str, str] = {}  # noqa: RUF012 (replaced per task, never mutated)
    #: its reward is 1[a = y] for a label y (what ``label_flip`` flips: ``Friction.needs_label_reward``)
    label_reward: ClassVar[bool] = False

    def __init__(self, environment: Environment, policy: Policy, objective: Objective = PLAIN, *,
                 population: int = 1, frictions: FrictionStack | None = None, temperature: float = 1.0,
                 eps_mix: float = 0.0) -> None:
        self.environment, self.policy, self.objective = environment, policy, objective
        self.population, self.temperature, self.eps_mix = population, temperature, eps_mix
        self.frictions = FrictionStack() if frictions is None else frictions

    @property
    def resumable(self) -> bool:
        """Its sampler decodes each position with any version's parameters (the policy's)."""
        return self.policy.resumable

    @property
    def n_actions(self) -> int:
        return self.policy.n_actions

    @property
    def device(self) -> torch.device:
        """The run's device (set by the loop): random draws stay on the CPU generators and the drawn
        tensors move there."""
        return self.environment.device

    @device.setter
    def device(self, device: torch.device) -> None:
        self.environment.device = device
        object.__setattr__(self.policy, "device", device)  # policies may be frozen dataclasses

    def knobs(self) -> dict[str, Any]:
        """The fields the task was made with (``type(task)(**task.knobs())`` makes it again; its
        ``policy`` and ``objective`` attributes hold the built parts, these their names)."""
        knobs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init and f.name != "frictions"}
        return knobs | self.given_names

    def attach_frictions(self, frictions: FrictionStack) -> None:
        self.frictions = frictions

    def memory(self) -> tuple[int, int]:
        """Rough bytes of the whole population's parameters and of one step's batch (the actor's
        and the learner's activations), from the sizes alone; (0, 0) where the task cannot say."""
        return 0, 0

    def work(self) -> float:
        """Rough floating-point operations of one learner step (the actor's and the learner's
        passes), from the sizes alone; 0 where the task cannot say (``check_task_time``)."""
        return 0.0

    # ------------------------------------------------------------------ actor side
    def init_params(self, generator: torch.Generator) -> list[Tensor]:
        """Initial parameters, each ``[S, ...]``; the environment's state (per-seed labels, a prompt
        pool) is drawn from the same generator, before or after them as the environment says."""
        if self.environment.state_first:
            self.environment.reset(generator)
        params = self.policy.init(self.population, generator)
        if not self.environment.state_first:
            self.environment.reset(generator)
        return params

    def draw_batch(self, generator: torch.Generator) -> Batch:
        """The contexts of one step."""
        return self.environment.draw_batch(generator)

    def friction_context(self, batch: Batch, seed: int) -> FrictionContext:
        """What frictions may know of the batch (correct and wrong answers, reward range …)."""
        env = self.environment
        return FrictionContext(n_actions=self.policy.n_actions, reward_range=env.reward_range,
                               correct_actions=env.correct_answers(batch), wrong_actions=env.wrong_answers(batch),
                               seed=seed)

    def sample(self, params: Sequence[Tensor], batch: Batch, chain: SamplingChain, generator: torch.Generator,
               versions: Versions | None = None) -> PolicySample:
        """Draw the batch's tokens with (friction-transformed) actor ``params`` through ``chain``;
        a ``resumable`` policy decodes position t with ``versions``' parameters instead when given."""
        return self.policy.sample(params, self.environment.observe(batch.obs, batch.extras), chain, generator, versions)

    def reward(self, batch: Batch, actions: Tensor, generator: torch.Generator) -> Tensor:
        """Rewards ``[*P, B]`` of ``actions [*P, B, T]``."""
        return self.environment.reward(batch, actions, generator)

    def token_mask(self, batch: Batch, actions: Tensor) -> Tensor:
        """Valid tokens ``[*P, B, T]``."""
        return self.environment.token_mask(batch, actions)

    def rollout_extras(self, batch: Batch, ctx: FrictionContext, actor_params: Sequence[Tensor],
                       params: Sequence[Tensor], sample: PolicySample) -> dict[str, Tensor]:
        """The environment's tensors for the learner and the diagnostics, and the policy's of its sampler."""
        extras = self.environment.rollout_extras(batch, ctx.correct_actions, bool(self.frictions))
        learner = self.policy.sampler_mismatch(self.environment.observe(batch.obs, batch.extras), actor_params,
                                               params, sample)
        if learner is not None:  # the k3 KL of the sampler's numerics to the learner's on the same tokens
            extras["sampler_k3_kl"] = k3_kl(sample.logp, learner, self.environment.token_mask(batch, sample.actions))
        return extras

    # ------------------------------------------------------------------ learner side
    def score(self, params: Sequence[Tensor], rollout: Rollout, grad: bool = True) -> Scored:
        """The learner's log-probs of the rollout's tokens through the policy's one scorer
        (differentiable unless ``grad`` is False or the objective rescores the rows it keeps)."""
        obs = self.environment.observe(rollout.obs, rollout.extras)
        with torch.set_grad_enabled(grad and not self.objective.rescores and torch.is_grad_enabled()):
            return self.policy.scored(params, obs, rollout.actions, self.environment.target(rollout.extras))

    def learner_rollout(self, rollout: Rollout) -> Rollout:
        """The rollout as the learner sees it (``behavior='true'`` hands it the true μ)."""
        if self.behavior == "true":
            return rollout.replace(behavior_logp=rollout.true_behavior_logp)
        return rollout

    def token_logits(self, params: Sequence[Tensor], rollout: Rollout) -> Tensor | None:
        """The learner's next-token logits ``[*P, B, T, V]`` at every token of ``rollout`` (no
        gradient), for the entropy signal (``sandbox.diagnostics.token_entropy``); None where the
        policy cannot give them."""
        obs = self.environment.observe(rollout.obs, rollout.extras)
        with torch.no_grad():
            return self.policy.token_logits([p.detach() for p in params], obs, rollout.actions)

    def evaluate(self, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """Metrics of the learner, each ``[S]`` (e.g. ``error``)."""
        return self.environment.evaluate(self.policy, [p.detach() for p in params], generator)

    def update_diagnostics(self, params: Sequence[Tensor], rollout: Rollout, grad: Tensor,
                           terms_of: Callable | None = None) -> dict[str, Tensor]:
        """Diagnostics of the update ``grad`` [S, D] (the task's ``diagnostics`` hook), each ``[S]``;
        ``terms_of(params, rollout, advantage)`` is the learner's ``PGTerms`` builder, for probes."""
        if self.diagnostics is None:
            return {}
        return self.diagnostics(self, params, rollout, grad, terms_of)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Environment state drawn at ``init_params`` (restored by checkpoints)."""
        return self.environment.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.environment.load_state_dict(state)


#: the calls ``Task`` writes once: a registered task overrides none of them (tests/test_layers.py)
TASK_CALLS = ("init_params", "draw_batch", "friction_context", "sample", "reward", "token_mask", "rollout_extras",
              "score", "learner_rollout", "token_logits", "evaluate", "update_diagnostics", "state_dict",
              "load_state_dict")
