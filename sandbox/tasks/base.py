"""A task is an environment composed with a policy family, in functional form over population
parameters ``[S, ...]`` (S seeds train as one batched computation).

The runtime owns everything else. Its one actor (``sandbox.runtime.actor``) asks the task for a
batch of contexts, the policy's samples under the friction stack's sampling chain and the rewards;
its one learner (``sandbox.runtime.learner``) asks the task to score a rollout under the learner's
parameters and builds ``PGTerms``. A task only says *what* its environment and policy are:

    draw_batch → friction_context → sample (policy + chain) → reward      (actor side)
    score → (the learner: terms → objective) → evaluate / update_diagnostics   (learner side)
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from sandbox.core.plugins import entry_points_of
from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.core.sampling import SamplingChain
from sandbox.core.validation import check_memory, gib
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.objectives import PLAIN, Objective
from sandbox.policies.decode import Versions

TASKS: Registry[Task] = Registry("task")


def register_task(name: str, *, replace: bool = False):
    return TASKS.register(name, replace=replace)


def load_tasks() -> None:
    """Import the modules that register tasks: the ``sandbox.tasks`` entry points (pyproject.toml);
    imported on first use so that workers know every task."""
    for entry in entry_points_of("sandbox.tasks").values():
        entry.load()


def make_task(name: str, **kwargs) -> Task:
    """``make_task("bandit", K=100, batch_size=100, population=10)``; sizes that cannot fit in
    memory are refused here, before anything is allocated (``check_task_memory``)."""
    if name not in TASKS:
        load_tasks()
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
    given = [f"{f.name}={getattr(task, f.name)}" for f in dataclasses.fields(task)
             if isinstance(getattr(task, f.name), int) and f.default is not dataclasses.MISSING
             and getattr(task, f.name) != f.default]
    what = f"task {task.name!r}" + (f" with {', '.join(given)}" if given else "") + (f" and {why}" if why else "")
    check_memory(what, need, f"parameters {gib(params)} × {PARAMETER_COPIES + param_snapshots} copies (values, "
                             f"gradients, Adam's moments, actor{', stale snapshots' if param_snapshots else ''}), "
                             f"a step's batch {gib(batch)}" + (f" × {1 + batch_snapshots}" if batch_snapshots else ""))


@dataclass
class Batch:
    """What the environment drew for one step: ``obs`` (what the policy conditions on: context ids,
    images, prompts), ``rows`` (the context of each of the B rows, for rewards and frictions),
    ``group`` (baseline group per row) and environment-specific ``extras``."""

    obs: Any
    rows: Any
    group: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class PolicySample:
    """Tokens ``[*P, B, T]`` drawn by the actor, their log-probs under its sampling chain, and
    ``logp_of(actions)``: the per-token log-probs of any tokens under the same actor (for the true μ
    of rows a friction replaces)."""

    actions: Tensor
    logp: Tensor
    logp_of: Callable[[Tensor], Tensor]


@dataclass
class Scored:
    """The learner's view of a rollout: differentiable ``logp [*P, B, T]``, the supervised target's
    log-probs (or None) and lazy providers of the extra inputs baselines may need
    (``probs``, ``grad_sq_norms``; ``rho`` and ``mask`` are supplied by the learner)."""

    logp: Tensor
    target_logp: Tensor | None = None
    providers: dict[str, Callable[[], Tensor]] = field(default_factory=dict)


class Task(ABC):
    """Subclasses are dataclasses (their fields are the task's knobs, each with a comment) registered by name."""

    population: int
    frictions: FrictionStack
    #: the actor samples at this temperature and ε (fields of tasks that expose them)
    temperature: float = 1.0
    eps_mix: float = 0.0
    #: learner settings that learn on this task (``RunConfig`` uses them unless told otherwise)
    default_advantage: ClassVar[str] = "group_mean"
    default_optimizer: ClassVar[str] = "adam"
    default_lr: ClassVar[float] = 1e-3
    #: its sampler decodes each position with any version's parameters (``sample(versions=…)``:
    #: a rollout resumed under newer parameters, ``sandbox.frictions.partial``)
    resumable: ClassVar[bool] = False
    #: the loss the learner differentiates (``sandbox.objectives``), chosen from the task's knobs
    #: (``mode='exact'``, ``backward='screened'``) when it is built
    objective: Objective = PLAIN
    #: the device types its tensors may live on (``RunConfig.device``), and the run's device, set
    #: by the loop: random draws stay on the CPU generators and the drawn tensors move there
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    device: torch.device = torch.device("cpu")

    def attach_frictions(self, frictions: FrictionStack) -> None:
        self.frictions = frictions

    def memory(self) -> tuple[int, int]:
        """Rough bytes of the whole population's parameters and of one step's batch (the actor's
        and the learner's activations), from the sizes alone; (0, 0) where the task cannot say."""
        return 0, 0

    # ------------------------------------------------------------------ parameters and environment
    @abstractmethod
    def init_params(self, generator: torch.Generator) -> list[Tensor]:
        """Initial parameters, each ``[S, ...]`` (environment state such as per-seed labels or a
        prompt pool is drawn here too, from the same generator)."""

    @abstractmethod
    def draw_batch(self, generator: torch.Generator) -> Batch:
        """The contexts of one step."""

    @abstractmethod
    def friction_context(self, batch: Batch, seed: int) -> FrictionContext:
        """What frictions may know of the batch (correct and wrong answers, reward range …)."""

    @abstractmethod
    def reward(self, batch: Batch, actions: Tensor, generator: torch.Generator) -> Tensor:
        """Rewards ``[*P, B]`` of ``actions [*P, B, T]``."""

    # ------------------------------------------------------------------ policy
    @abstractmethod
    def sample(self, params: Sequence[Tensor], batch: Batch, chain: SamplingChain,
               generator: torch.Generator, versions: Versions | None = None) -> PolicySample:
        """Draw the batch's tokens with (friction-transformed) actor ``params`` through ``chain``;
        a ``resumable`` task decodes position t with ``versions``' parameters instead when given."""

    def token_mask(self, batch: Batch, actions: Tensor) -> Tensor:
        """Valid tokens ``[*P, B, T]`` (default: all)."""
        return torch.ones(actions.shape, dtype=torch.bool, device=actions.device)

    def rollout_extras(self, batch: Batch, ctx: FrictionContext, actor_params: Sequence[Tensor],
                       params: Sequence[Tensor], sample: PolicySample) -> dict[str, Tensor]:
        """Environment-specific tensors the learner or the diagnostics need (default: the batch's)."""
        return dict(batch.extras)

    # ------------------------------------------------------------------ learner
    @abstractmethod
    def score(self, params: Sequence[Tensor], rollout: Rollout, grad: bool = True) -> Scored:
        """The learner's log-probs of the rollout's tokens (differentiable unless ``grad`` is False)."""

    def learner_rollout(self, rollout: Rollout) -> Rollout:
        """The rollout as the learner sees it (e.g. MNIST's ``behavior='true'`` hands it true μ)."""
        return rollout

    def token_logits(self, params: Sequence[Tensor], rollout: Rollout) -> Tensor | None:
        """The learner's next-token logits ``[*P, B, T, V]`` at every token of ``rollout`` (no
        gradient), for the entropy signal (``sandbox.diagnostics.token_entropy``); None (the
        default) where the task cannot give them."""
        return None

    @abstractmethod
    def evaluate(self, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """Metrics of the learner, each ``[S]`` (e.g. ``error``)."""

    def update_diagnostics(self, params: Sequence[Tensor], rollout: Rollout, grad: Tensor, estimator,
                           terms_of: Callable | None = None) -> dict[str, Tensor]:
        """Diagnostics of the update ``grad`` [S, D] (e.g. cosines to oracle gradients), each ``[S]``;
        ``terms_of(params, rollout, advantage)`` is the learner's ``PGTerms`` builder, for probes."""
        return {}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Environment state drawn at ``init_params`` (restored by checkpoints)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)
