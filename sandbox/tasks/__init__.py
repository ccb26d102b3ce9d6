"""Tasks: an environment composed with a policy family (+ an objective variant: exact enumeration,
screened Kondo). ``make_task(name, **fields)``; ``TASKS.names()`` lists them."""

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
