"""One place that builds a run's components from its ``RunConfig``: ``build(config)``.

The learner (``ActorLearner``), the Ray rollout workers and ``check_async`` call ``build``;
``sandbox score`` and ``sandbox check`` build their methods' estimator, baseline and controllers
with ``build_method``, and a deployment's frictions with ``build_frictions``. Every component comes
from its registry's ``make`` (which notes it for the job's fingerprints, ``sandbox.core.usage``),
always in the same order — task, estimator, advantage, controllers, frictions, delay schedule,
optimiser — and a failure is one ``ValueError`` line that starts with the config field at fault.
The makers and the checks between components live in ``sandbox.runtime.components``, which a
config's own validation uses too (``RunConfig.__post_init__`` → ``check_run``: it builds no run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandbox.frictions import FrictionStack
from sandbox.runtime.components import (
    Method,
    build_frictions,
    build_method,
    check_components,
    make_optimizer,
    make_task,
    wrap,
)
from sandbox.runtime.config import RunConfig
from sandbox.runtime.optim import PopulationOptimizer
from sandbox.tasks import Task


@dataclass(frozen=True)
class Components:
    """A run's components, fresh for each ``build``: the task (its frictions attached), the
    estimator, baseline and controllers, the friction stack with its delay schedule, the optimiser."""

    task: Task
    estimator: Any
    advantage: Any
    controllers: list
    frictions: FrictionStack
    optimizer: PopulationOptimizer

    @property
    def schedule(self):
        """The delay schedule and admission: the friction stack's first stage."""
        return self.frictions.schedule


def build(config: RunConfig) -> Components:
    """Every component of ``config``'s run, checked against each other (a label-flipping friction
    needs a task that pays a label-match reward; the task with its stale copies must fit in memory),
    and noted for the job's fingerprints (optimiser, delay schedule, runtime)."""
    from sandbox.core.usage import note
    from sandbox.frictions import DelaySchedule

    task = make_task(config.task, config.task_kwargs)
    method = build_method(config.estimator, config.estimator_kwargs, config.advantage, config.advantage_kwargs,
                          config.controllers)
    frictions = build_frictions(config.frictions, config.staleness)
    check_components(task, frictions, task_name=config.task, friction_names=[n for n, _ in config.frictions],
                     steps=config.steps, history=config.history, device=config.device)
    optimizer = make_optimizer(config.optimizer, config.lr, config.optimizer_kwargs)
    task.attach_frictions(frictions)
    note("optimizer", config.optimizer)  # the components a job's numbers depend on (sandbox.core.usage)
    note("staleness", frictions.schedule.kind, DelaySchedule,
         {k: v for k, v in config.staleness.items() if k != "kind"})
    note("runtime", "loop")
    return Components(task, method.estimator, method.advantage, method.controllers, frictions, optimizer)


__all__ = ["Components", "Method", "build", "build_frictions", "build_method", "wrap"]
