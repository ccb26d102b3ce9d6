"""One place that builds a run's components from its ``RunConfig``: ``build(config)``.

Validation (``RunConfig.__post_init__`` builds once, cheaply, so that a bad value fails there),
the learner (``ActorLearner``), the Ray rollout workers and ``check_async`` call ``build``;
``sandbox score`` and ``sandbox check`` build their methods' estimator, baseline and controllers
with ``build_method``, and a deployment's frictions with ``build_frictions``. Every component comes
from its registry's ``make`` (which notes it for the job's fingerprints, ``sandbox.core.usage``),
always in the same order — task, estimator, advantage, controllers, frictions, delay schedule,
optimiser — and a failure is one ``ValueError`` line that starts with the config field at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.frictions import FrictionStack
    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.optim import PopulationOptimizer
    from sandbox.tasks import Task


def wrap(where: str, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``make(*args, **kwargs)``; a failure becomes one ``ValueError`` line that starts with ``where``
    (the RunConfig field at fault)."""
    try:
        return make(*args, **kwargs)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: " + " ".join(str(err).split())) from None


def _made(where: str | None, registry, name: str, kwargs: dict, where_kwargs: str | None = None) -> Any:
    """``registry.make(name, **kwargs)`` after checking the kwargs' types against its fields; a
    failure names ``where`` (the field at fault), or is raised as it is when ``where`` is None."""
    from sandbox.core.validation import check_field_types

    def at(field: str, make: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return make(*args, **kw) if where is None else wrap(field, make, *args, **kw)

    cls = at(where, registry.get, name)
    where_kwargs = where_kwargs or f"{where}_kwargs"
    at(where_kwargs, check_field_types, cls, kwargs)
    return at(where_kwargs, registry.make, name, **kwargs)


@dataclass(frozen=True)
class Method:
    """What a method of learning is made of: the estimator, the baseline and the controllers."""

    estimator: Any
    advantage: Any
    controllers: list


def build_method(estimator: str, estimator_kwargs: dict, advantage: str | None = None,
                 advantage_kwargs: dict | None = None, controllers: Sequence = (), named: bool = True) -> Method:
    """The estimator, then the baseline (None when ``advantage`` is None), then each controller,
    from their registries; a failure names the RunConfig field (``estimator_kwargs: eta must lie
    in …``), or with ``named=False`` is raised as the component gave it (``eta must lie in …``:
    a scored method names itself)."""
    from sandbox.advantages import ADVANTAGES
    from sandbox.controllers import CONTROLLERS
    from sandbox.estimators import ESTIMATORS

    def field(where: str) -> str | None:
        return where if named else None

    built_estimator = _made(field("estimator"), ESTIMATORS, estimator, estimator_kwargs, field("estimator_kwargs"))
    built_advantage = (None if advantage is None else
                       _made(field("advantage"), ADVANTAGES, advantage, dict(advantage_kwargs or {}),
                             field("advantage_kwargs")))
    built_controllers = [_made(field(f"controllers[{i}]"), CONTROLLERS, name, kwargs, field(f"controllers[{i}] {name}"))
                         for i, (name, kwargs) in enumerate(controllers)]
    return Method(built_estimator, built_advantage, built_controllers)


def build_frictions(frictions: Sequence = (), staleness: dict | None = None, named: bool = True) -> FrictionStack:
    """The friction stack of ``RunConfig.frictions`` behind the delay schedule of
    ``RunConfig.staleness`` (its first stage): delay → … → admission. A failure names the field
    (``frictions[0] landmine: …``, ``staleness: …``), or with ``named=False`` is raised as it is."""
    from sandbox.frictions import FRICTIONS, FrictionStack

    items = [_made(f"frictions[{i}]" if named else None, FRICTIONS, name, kwargs, f"frictions[{i}] {name}")
             for i, (name, kwargs) in enumerate(frictions)]
    if not named:
        return FrictionStack.from_config(items, staleness or {})
    return wrap("staleness", FrictionStack.from_config, items, staleness or {})


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
    from sandbox.runtime.optim import PopulationOptimizer
    from sandbox.tasks import TASKS, load_tasks

    if config.task not in TASKS:
        load_tasks()
    task = _made("task", TASKS, config.task, config.task_kwargs)
    method = build_method(config.estimator, config.estimator_kwargs, config.advantage, config.advantage_kwargs,
                          config.controllers)
    frictions = build_frictions(config.frictions, config.staleness)
    _check_components(config, task, frictions)
    optimizer = _optimizer(PopulationOptimizer, config)
    task.attach_frictions(frictions)
    note("optimizer", config.optimizer)  # the components a job's numbers depend on (sandbox.core.usage)
    note("staleness", frictions.schedule.kind, DelaySchedule,
         {k: v for k, v in config.staleness.items() if k != "kind"})
    note("runtime", "loop")
    return Components(task, method.estimator, method.advantage, method.controllers, frictions, optimizer)


def _optimizer(cls, config: RunConfig):
    """The run's ``PopulationOptimizer``; ``optimizer_kwargs`` may set only its ``OPTIMIZER_KWARGS``."""
    from sandbox.runtime.optim import OPTIMIZER_KWARGS

    unknown = sorted(set(config.optimizer_kwargs) - set(OPTIMIZER_KWARGS))
    if unknown:
        raise ValueError(f"optimizer_kwargs: unknown field(s) {unknown}; valid: {list(OPTIMIZER_KWARGS)}")
    try:
        return cls(config.optimizer, lr=config.lr, **config.optimizer_kwargs)
    except ValueError as err:
        raise ValueError(f"optimizer_kwargs: {err}") from None


def _label_tasks() -> list[str]:
    from sandbox.tasks import TASKS

    return [name for name in TASKS.names() if getattr(TASKS.get(name), "label_reward", False)]


def _check_components(config: RunConfig, task, frictions) -> None:
    """The delay schedule against the run's length, label frictions against the task's
    reward, and the task's memory with the stale copies the schedule makes it keep."""
    from sandbox.frictions import FRICTIONS
    from sandbox.tasks.base import check_task_memory

    schedule = frictions.schedule
    schedule.check_steps(config.steps)  # a kind that never delays within the run: a synchronous run under a stale name
    for i, (name, _) in enumerate(config.frictions):  # a class attribute: inactive frictions left the stack
        if getattr(FRICTIONS.get(name), "needs_label_reward", False) and not getattr(task, "label_reward", False):
            raise ValueError(f"frictions[{i}] {name}: flips the label of a reward 1[a = y], but task {config.task!r} "
                             f"pays no such reward ({type(task).__doc__.split('.')[0].strip()}); use it on a task "
                             f"whose reward is a label match: {', '.join(_label_tasks())}")
    stale = min(schedule.max_delay, config.steps)  # snapshots of parameters or rollouts the run keeps
    why = f"staleness D={schedule.max_delay} (history={config.history!r} keeps {stale} stale copies)" if stale else ""
    wrap("task_kwargs", check_task_memory, task, stale * (config.history == "params"),
         stale * (config.history == "rollouts"), why)


__all__ = ["Components", "Method", "build", "build_frictions", "build_method", "wrap"]
