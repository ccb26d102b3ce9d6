"""How each of a run's components is made from its registry and checked against the others —
below both ``RunConfig`` (``sandbox.runtime.config``, whose validation calls ``check_run``) and
``build(config)`` (``sandbox.runtime.build``, which makes a run's components with these makers), so
that neither imports the other's module in a loop.

Every component comes from its registry's ``make`` after its kwargs' types are checked; a failure
is one ``ValueError`` line that starts with the RunConfig field at fault. ``check_run`` makes each
component once to run its own checks (an estimator's range, a task's sizes), then the checks
between them (delay schedule vs. run length, a label friction vs. the task's reward, memory) — no
optimiser, no population parameters, nothing attached or noted for fingerprints — and remembers a
config it passed, so that ``replace``/``from_dict`` of an equal config (the seeds of a run, a job
read back in its worker) are not checked again in the same process.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.frictions import FrictionStack


def wrap(where: str, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``make(*args, **kwargs)``; a failure becomes one ``ValueError`` line that starts with ``where``
    (the RunConfig field at fault)."""
    try:
        return make(*args, **kwargs)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: " + " ".join(str(err).split())) from None


def made(where: str | None, registry, name: str, kwargs: dict, where_kwargs: str | None = None) -> Any:
    """``registry.make(name, **kwargs)`` after checking the kwargs' types against its fields; a
    failure names ``where`` (the field at fault), or is raised as it is when ``where`` is None."""
    from sandbox.core.validation import check_field_types

    def at(field: str, make: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return make(*args, **kw) if where is None else wrap(field, make, *args, **kw)

    cls = at(where, registry.get, name)
    where_kwargs = where_kwargs or f"{where}_kwargs"
    at(where_kwargs, check_field_types, cls, kwargs)
    return at(where_kwargs, registry.make, name, **kwargs)


def task_class(name: str) -> type:
    """The registered task class ``name`` (registering the entry points' tasks first); an unknown
    name is one line starting ``task:``."""
    from sandbox.tasks import TASKS, load_tasks

    if isinstance(name, str) and name not in TASKS:
        load_tasks(name)
    return wrap("task", TASKS.get, name)


def make_task(name: str, kwargs: dict) -> Any:
    from sandbox.tasks import TASKS

    task_class(name)
    return made("task", TASKS, name, kwargs)


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

    built_estimator = made(field("estimator"), ESTIMATORS, estimator, estimator_kwargs, field("estimator_kwargs"))
    built_advantage = (None if advantage is None else
                       made(field("advantage"), ADVANTAGES, advantage, dict(advantage_kwargs or {}),
                            field("advantage_kwargs")))
    built_controllers = [made(field(f"controllers[{i}]"), CONTROLLERS, name, kwargs, field(f"controllers[{i}] {name}"))
                         for i, (name, kwargs) in enumerate(controllers)]
    return Method(built_estimator, built_advantage, built_controllers)


def build_frictions(frictions: Sequence = (), staleness: dict | None = None, named: bool = True) -> FrictionStack:
    """The friction stack of ``RunConfig.frictions`` behind the delay schedule of
    ``RunConfig.staleness`` (its first stage): delay → … → admission. A failure names the field
    (``frictions[0] landmine: …``, ``staleness: …``), or with ``named=False`` is raised as it is."""
    from sandbox.frictions import FRICTIONS, FrictionStack

    items = [made(f"frictions[{i}]" if named else None, FRICTIONS, name, kwargs, f"frictions[{i}] {name}")
             for i, (name, kwargs) in enumerate(frictions)]
    if not named:
        return FrictionStack.from_config(items, staleness or {})
    return wrap("staleness", FrictionStack.from_config, items, staleness or {})


def _label_tasks() -> list[str]:
    from sandbox.tasks import TASKS, load_tasks

    load_tasks()  # every task's name, not only those this process imported
    return [name for name in TASKS.names() if TASKS.get(name).label_reward]


def check_components(task, frictions: FrictionStack, *, task_name: str, friction_names: Sequence[str],
                     steps: int, history: str, device: str = "cpu") -> None:
    """The delay schedule against the run's length (``steps``), label frictions against the task's
    reward, the task's memory with the stale copies the schedule makes it keep (``history``:
    'params' snapshots or 'rollouts'), and the run's time on ``device`` (``check_task_time``)."""
    from sandbox.frictions import FRICTIONS
    from sandbox.tasks.base import check_task_memory, check_task_time

    schedule = frictions.schedule
    schedule.check_steps(steps)  # a kind that never delays within the run: a synchronous run under a stale name
    for i, name in enumerate(friction_names):  # a class attribute: inactive frictions left the stack
        if FRICTIONS.get(name).needs_label_reward and not task.label_reward:
            raise ValueError(f"frictions[{i}] {name}: flips the label of a reward 1[a = y], but task {task_name!r} "
                             f"pays no such reward ({type(task).__doc__.split('.')[0].strip()}); use it on a task "
                             f"whose reward is a label match: {', '.join(_label_tasks())}")
    stale = min(schedule.max_delay, steps)  # snapshots of parameters or rollouts the run keeps
    why = f"staleness D={schedule.max_delay} (history={history!r} keeps {stale} stale copies)" if stale else ""
    wrap("task_kwargs", check_task_memory, task, stale * (history == "params"), stale * (history == "rollouts"), why)
    check_task_time(task, steps, device)


def _canonical(value: Any) -> Any:
    """``value`` with every dict's keys sorted and each value tagged by its type (the memory of passed
    configs keeps 1, 1.0 and True, a list and a tuple apart; key order is not a difference)."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _canonical(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(v) for v in value))
    return (type(value).__name__, value)


#: configs (their component fields, ``_canonical``) that passed ``check_run`` in this process
_PASSED: OrderedDict[str, None] = OrderedDict()
_PASSED_MAX = 4096


def _classes(task: str, estimator: str, advantage: str | None, controllers: Sequence, frictions: Sequence) -> tuple:
    """The identities of the classes the names resolve to now (a plugin that registers another class
    under a name, ``replace=True``, is checked afresh); None for a name not registered (yet)."""
    from sandbox.advantages import ADVANTAGES
    from sandbox.controllers import CONTROLLERS
    from sandbox.estimators import ESTIMATORS
    from sandbox.frictions import FRICTIONS
    from sandbox.tasks import TASKS

    named = [(TASKS, task), (ESTIMATORS, estimator), (ADVANTAGES, advantage),
             *[(CONTROLLERS, n) for n, _ in controllers], *[(FRICTIONS, n) for n, _ in frictions]]
    return tuple(id(registry.get(n)) if isinstance(n, str) and n in registry else None for registry, n in named)


def make_optimizer(name: str, lr: float, optimizer_kwargs: dict):
    """The run's ``PopulationOptimizer``; ``optimizer_kwargs`` may set only its ``OPTIMIZER_KWARGS``
    (a failure is one line that starts with ``optimizer_kwargs``)."""
    from sandbox.runtime.optim import OPTIMIZER_KWARGS, PopulationOptimizer

    unknown = sorted(set(optimizer_kwargs) - set(OPTIMIZER_KWARGS))
    if unknown:
        raise ValueError(f"optimizer_kwargs: unknown field(s) {unknown}; valid: {list(OPTIMIZER_KWARGS)}")
    return wrap("optimizer_kwargs", PopulationOptimizer, name, lr=lr, **optimizer_kwargs)


def check_run(*, task: str, task_kwargs: dict, estimator: str, estimator_kwargs: dict, advantage: str | None,
              advantage_kwargs: dict, controllers: Sequence, frictions: Sequence, staleness: dict, steps: int,
              history: str, device: str = "cpu") -> None:
    """Check a run's components — each made once by its registry (its own checks), then against
    each other (``check_components``) — without building the run: no optimiser, nothing attached,
    nothing noted for fingerprints (``sandbox.core.usage.paused``). A config that passed is
    remembered for the process (its seed, label, learning rate … play no part)."""
    from sandbox.core.usage import paused

    fields = {"task": task, "task_kwargs": task_kwargs, "estimator": estimator, "estimator_kwargs": estimator_kwargs,
              "advantage": advantage, "advantage_kwargs": advantage_kwargs, "controllers": controllers,
              "frictions": frictions, "staleness": staleness, "steps": steps, "history": history, "device": device}
    def key() -> str:
        return repr((_canonical(fields), _classes(task, estimator, advantage, controllers, frictions)))

    if key() in _PASSED:
        return
    with paused():
        made_task = make_task(task, task_kwargs)
        build_method(estimator, estimator_kwargs, advantage, advantage_kwargs, controllers)
        stack = build_frictions(frictions, staleness)
        check_components(made_task, stack, task_name=task, friction_names=[n for n, _ in frictions], steps=steps,
                         history=history, device=device)
    if len(_PASSED) >= _PASSED_MAX:
        _PASSED.popitem(last=False)  # the oldest (one C call: safe beside other threads)
    _PASSED[key()] = None  # after the checks: the task's entry points are loaded now


__all__ = ["Method", "build_frictions", "build_method", "check_components", "check_run", "made", "make_optimizer",
           "make_task",
           "task_class", "wrap"]
