"""Jobs on a device: ``--device cuda`` on ``sandbox reproduce | sweep | score | check`` (and
``$SANDBOX_DEVICE`` in a notebook's ``results()``) moves every run config of a job list whose
task can run there (``Task.devices``); the others stay on the CPU. A moved run config carries its
device, so its job id differs from the CPU run's, whose results are never mixed with it."""

from __future__ import annotations

import copy
import os
from dataclasses import replace

from sandbox.jobs.sweep import Job
from sandbox.runtime.config import check_device


def device_from_env() -> str:
    """``$SANDBOX_DEVICE`` (default 'cpu'), validated."""
    device = os.environ.get("SANDBOX_DEVICE", "cpu")
    try:
        check_device(device)
    except ValueError as err:
        raise ValueError(f"SANDBOX_DEVICE: {err}") from None
    return device


def _is_run_config(params) -> bool:
    """A RunConfig's dict, or the run fields of a scoring cell (``task`` with ``task_kwargs``)."""
    return isinstance(params, dict) and isinstance(params.get("task"), str) and (
        "estimator" in params or "task_kwargs" in params)


def _runs_on(task: str, device: str) -> bool:
    from sandbox.tasks import TASKS, load_tasks

    if task not in TASKS:
        load_tasks(task)
    return task in TASKS and device.split(":")[0] in TASKS.get(task).devices


def _move(params, device: str):
    if _is_run_config(params):
        return {**params, "device": device} if _runs_on(params["task"], device) else params
    if isinstance(params, dict):
        return {k: _move(v, device) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return type(params)(_move(v, device) for v in params)
    return params


def on_device(jobs: list[Job], device: str) -> list[Job]:
    """The jobs with every run config (a dict with ``task`` and ``estimator`` or ``task_kwargs``, nested ones too) whose
    task runs on ``device`` moved there; 'cpu' returns the jobs unchanged."""
    check_device(device)
    if device == "cpu":
        return list(jobs)
    return [replace(job, params=_move(copy.deepcopy(job.params), device)) for job in jobs]


__all__ = ["device_from_env", "on_device"]
