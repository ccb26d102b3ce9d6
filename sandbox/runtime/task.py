"""A Task is an environment with its policy family, in functional form over population parameters.

The loop (``sandbox.runtime.loop``) owns staleness, advantages, the estimator, controllers and the
optimiser; a task only says how to sample a rollout with given (possibly stale) parameters, how to
score it under the learner, and how to evaluate the learner. Parameters are a list of tensors with
a leading population axis ``[S, ...]``: S seeds train as one batched computation.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from sandbox.advantages import Advantage
from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.estimators.base import Estimator, EstimatorOutput, PGTerms
from sandbox.frictions.base import FrictionStack

TASKS: Registry[Task] = Registry("task")


def register_task(name: str, *, replace: bool = False):
    return TASKS.register(name, replace=replace)


#: modules that register tasks; imported on first use so that workers know every task
TASK_MODULES = ("sandbox.envs.bandits", "sandbox.envs.mnist", "sandbox.envs.sequences", "sandbox.policies.hf",
                "sandbox.envs.text")


def load_tasks() -> None:
    for module in TASK_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:  # a missing dependency of an existing module is an error
                raise


def make_task(name: str, **kwargs) -> Task:
    """``make_task("bandit", K=100, batch_size=100, population=10)``."""
    if name not in TASKS:
        load_tasks()
    return TASKS.make(name, **kwargs)


class Task(ABC):
    """Subclasses are dataclasses (their fields are the environment's knobs) registered by name."""

    population: int
    frictions: FrictionStack

    def attach_frictions(self, frictions: FrictionStack) -> None:
        self.frictions = frictions

    @abstractmethod
    def init_params(self, generator: torch.Generator) -> list[Tensor]:
        """Initial parameters, each ``[S, ...]``."""

    @abstractmethod
    def collect(self, actor_params: Sequence[Tensor], step: int, version: int, generator: torch.Generator,
                seed: int) -> Rollout:
        """Sample a batch with the actor's parameters (stamped ``version``), frictions applied."""

    @abstractmethod
    def learner_terms(self, params: Sequence[Tensor], rollout: Rollout, advantage: Advantage,
                      generator: torch.Generator, recompute_proximal: bool) -> PGTerms:
        """Score the rollout under the learner: differentiable log-probs, advantages from
        ``advantage(rewards, group, **inputs)`` (the task supplies the inputs it lists in
        ``advantage.needs``), and the estimator's other inputs. ``recompute_proximal`` sets
        π_prox to the learner's own (detached) log-probs instead of μ."""

    def objective(self, estimator: Estimator, terms: PGTerms, rollout: Rollout,
                  params: Sequence[Tensor] | None = None) -> EstimatorOutput:
        """The loss to differentiate (default ``estimator(terms)``); exact-gradient tasks weight
        enumerated actions, screened Kondo recomputes only the kept rows from ``params``."""
        return estimator(terms)

    @abstractmethod
    def evaluate(self, params: Sequence[Tensor], generator: torch.Generator) -> dict[str, Tensor]:
        """Metrics of the learner, each ``[S]`` (e.g. ``error``)."""

    def update_diagnostics(self, params: Sequence[Tensor], rollout: Rollout, grad: Tensor,
                           estimator: Estimator) -> dict[str, Tensor]:
        """Diagnostics of the update ``grad`` [S, D] (e.g. cosines to oracle gradients), each ``[S]``."""
        return {}
