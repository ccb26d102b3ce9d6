"""Tasks: ``Task(environment, policy, objective)`` — an environment × a policy family × an objective
variant (plain, exact enumeration, screened Kondo), the actor's and the learner's calls written
once. ``make_task(name, **fields)``; ``TASKS.names()`` lists them."""

from sandbox.tasks.base import (
    TASKS,
    Batch,
    PolicySample,
    Scored,
    Task,
    load_tasks,
    make_task,
    register_task,
)

__all__ = ["TASKS", "Batch", "PolicySample", "Scored", "Task", "load_tasks", "make_task", "register_task"]
