"""A run composed by name: every task preset takes the same keys — ``policy`` (a registered family,
``sandbox.policies.base.POLICIES``) with ``policy_kwargs``, and ``objective`` (``'plain'``,
``'exact'``, ``'screened'``: ``sandbox.objectives.OBJECTIVES``) — beside its environment's knobs.

A preset's own family (the bandits' ``tabular``, MNIST's ``mlp``, the sequence problems'
``transformer``, the text problems' ``causal_lm``) is built from the task's own fields, as before,
so the stored form of every run (``task``/``task_kwargs``) and its id do not move; another family
is built from the environment's spec (``Policy.from_spec(environment.spec, **policy_kwargs)``), and
only where it reads what the environment shows. Once built, a task's ``policy`` and ``objective``
attributes are the parts, not their names: ``Task.knobs()`` gives the fields it was made with. The older knobs that chose an objective (``mode``,
``backward``) and a sequence policy (``policy_family``) stay valid; naming the same choice twice
differently is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox.core.observations import ObservationSpec, check_reads
from sandbox.objectives import Objective, make_objective
from sandbox.policies.base import POLICIES, Policy


def _one_line(where: str, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return make(*args, **kwargs)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: " + " ".join(str(err).split())) from None


def chosen(key: str, value: str, default: str, older: str, older_value: str, older_default: str) -> str:
    """The choice of ``key`` (``objective``) given also by an older knob ``older`` (``mode``): the one
    moved off its default; both moved to different choices is refused."""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a str, got {type(value).__name__}")
    if value == default:
        return older_value
    if older_value not in (older_default, value):
        raise ValueError(f"{key}={value!r} contradicts {older}: leave {older} at its default or name the same choice")
    return value


def choose_policy(task: Any, name: str, spec: ObservationSpec, own: str, build_own: Callable[[], Policy],
                  key: str = "policy") -> Policy:
    """The family ``name`` for ``task`` on an environment that shows ``spec``: the preset's ``own``
    family built by ``build_own`` (from the task's fields: ``policy_kwargs`` must be empty), or the
    registered family built by ``from_spec(spec, **task.policy_kwargs)``. A family that does not read
    ``spec``'s kind is refused in one line naming both (and starting with ``key``, the knob that named it)."""
    # the names as given: the attributes ``policy`` and ``objective`` hold the built parts from here on
    task.given_names = {"policy": task.policy, "objective": task.objective}
    family = _one_line(key, POLICIES.get, name)
    kwargs = task.policy_kwargs
    if not (isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)):
        raise ValueError(f"policy_kwargs must be a dict of keyword arguments, got {type(kwargs).__name__}")
    _one_line(key, check_reads, f"policy {name!r}", family.reads, spec, f"task {task.name!r}")
    if name == own:
        if kwargs:
            raise ValueError(f"policy_kwargs: the {own!r} policy's knobs are task {task.name!r}'s own fields, "
                             f"got {sorted(kwargs)}")
        return build_own()
    if family.one_model_per_run and task.population != 1:
        raise ValueError(f"population: policy {name!r} is one model per run (run seeds as separate configs); "
                         f"got population={task.population}")
    return _one_line("policy_kwargs", family.from_spec, spec, **kwargs)


def one_model_per_run(task: type, task_kwargs: dict) -> bool:
    """Whether a run of the task class ``task`` with ``task_kwargs`` holds one model (its seeds are
    separate runs): the task's own family is, or the family its ``policy`` key names is."""
    name = task_kwargs.get("policy", task_kwargs.get("policy_family"))
    return task.one_model_per_run or (isinstance(name, str) and POLICIES.get(name).one_model_per_run)


def choose_objective(task: Any, name: str, spec: ObservationSpec, policy: Policy) -> Objective:
    """The objective ``name`` for ``policy`` on ``spec`` (one line naming both where it cannot run)."""
    return _one_line("objective", make_objective, name, spec, policy, f"task {task.name!r}")


__all__ = ["choose_objective", "choose_policy", "chosen", "one_model_per_run"]
