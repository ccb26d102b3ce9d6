"""A run's configuration: one dataclass, JSON-serialisable, whose hash names its results."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox.core.validation import (
    check_choice,
    check_int,
    check_range,
    short_repr,
)
from sandbox.runtime.components import build_frictions, check_run, make_optimizer, task_class
from sandbox.runtime.optim import OPTIMIZERS

PROXIMAL = ("auto", "behavior", "recompute")
#: the largest seed: a run's seed is stored in the int64 columns of its result (2**64 trained, then
#: its result could not be written)
SEED_MAX = 2**63 - 1
#: log points beyond steps + 1 log no step more (each step is logged once) but were allocated
#: (log_points = 10**12 asked for 7.28 TiB); the default is always allowed, and at most 2**20
LOG_POINTS, MAX_LOG_POINTS = 30, 2**20
HISTORY = ("params", "rollouts")


def _plain(value: Any) -> Any:
    """numpy scalars → Python scalars, recursively: ``np.int64(3)`` and ``3`` are the same config
    with the same hash (``json`` cannot hash numpy integers at all)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def check_device(device: Any) -> None:
    """'cpu', 'cuda' or 'cuda:N' (one ``ValueError`` line otherwise)."""
    if not (isinstance(device, str) and re.fullmatch(r"cpu|cuda(:\d+)?", device)):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {short_repr(device)}")


def _freeze(value: Any) -> Any:
    """Canonical JSON-able form (tuples → lists, nested dicts sorted)."""
    if isinstance(value, dict):
        return {str(k): _freeze(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_freeze(v) for v in value]
    return value


@dataclass(frozen=True)
class RunConfig:
    """One training run of ``population`` seeds (a task field) as one batched computation.

    Attributes:
        task: registered task name ('bandit', 'gaussian_bandit', 'mnist', 'sequences', …).
        task_kwargs: the task's fields (sizes, population, mode …).
        estimator, estimator_kwargs: registered estimator and its hyperparameters.
        advantage, advantage_kwargs: registered baseline (None: the task's ``default_advantage``).
        controllers: ((name, kwargs), …) applied in order between backward and optimiser.
        optimizer: 'adam' | 'adamw' | 'sgd' | 'normalized'; lr: its step size (None: the task's
            ``default_optimizer`` / ``default_lr``, settings that learn; resolved at construction,
            so the stored config and its hash hold the values used); optimizer_kwargs: its
            ``betas``, ``eps``, ``weight_decay`` ({} = the defaults; left out of ``to_dict`` and
            of the hash when empty, so runs without it keep their ids).
        staleness: the delay schedule and admission, ``DelaySchedule`` fields ({} = synchronous): the
            first stage of the friction stack, realised alike by the simulated loop and by Ray.
        frictions: ((name, kwargs), …) actor and reward frictions.
        proximal: π_prox = μ ('behavior'), the learner's own log-probs at the start of the update
            ('recompute'), or 'auto' (recompute for decoupled_ppo, μ otherwise).
        history: keep stale 'params' (a ring of snapshots) or eager 'rollouts' (a queue).
        seed: the run seed; every random draw derives from it.
        steps: learner updates; log_points: size of the logarithmic logging schedule.
        device: where the run's tensors live ('cpu', 'cuda', 'cuda:1'; tasks that run elsewhere
            than the CPU say so, ``Task.devices``). Random draws stay on CPU generators, so the
            same draws reach every device; 'cpu' is left out of ``to_dict`` and of the hash (so
            every CPU run keeps its id), any other device is part of both.
        label: a display name (not part of the hash).
    """

    task: str = "bandit"
    task_kwargs: dict = field(default_factory=dict)
    estimator: str = "reinforce"
    estimator_kwargs: dict = field(default_factory=dict)
    advantage: str | None = None
    advantage_kwargs: dict = field(default_factory=dict)
    controllers: tuple = ()
    optimizer: str | None = None
    lr: float | None = None
    optimizer_kwargs: dict = field(default_factory=dict)
    staleness: dict = field(default_factory=dict)
    frictions: tuple = ()
    proximal: str = "auto"
    history: str = "params"
    seed: int = 0
    steps: int = 100
    log_points: int = LOG_POINTS
    device: str = "cpu"
    label: str = ""

    def __post_init__(self) -> None:
        """Validate every field, and every component by making it once — task, estimator, advantage,
        controllers, frictions, delay schedule (``sandbox.runtime.components.check_run``, which
        builds no run and checks an equal config once per process) — so that a bad value fails
        here, as one ``ValueError`` line naming the field, not steps into a run (or never:
        ``steps=1.5``)."""
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _plain(getattr(self, f.name)))
        self._resolve_task_defaults()
        check_int("steps", self.steps, low=0)
        check_int("log_points", self.log_points, low=1, high=max(LOG_POINTS, min(self.steps + 1, MAX_LOG_POINTS)))
        check_int("seed", self.seed, low=0, high=SEED_MAX)  # stored in int64 columns of every result
        check_range("lr", self.lr, low=0.0, low_open=True)
        for name in ("task", "estimator", "advantage", "optimizer", "label"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a str, got {type(getattr(self, name)).__name__} "
                                 f"{short_repr(getattr(self, name))}")
        check_choice("proximal", self.proximal, PROXIMAL)
        check_device(self.device)
        check_choice("history", self.history, HISTORY)
        for name in ("task_kwargs", "estimator_kwargs", "advantage_kwargs", "staleness", "optimizer_kwargs"):
            kwargs = getattr(self, name)
            if not (isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)):
                raise ValueError(f"{name} must be a dict of keyword arguments (str keys), got {short_repr(kwargs)}")
        for name in ("controllers", "frictions"):
            entries = getattr(self, name)
            if not isinstance(entries, (tuple, list)):
                raise ValueError(f"{name} must be a sequence of (name, kwargs) pairs, got {short_repr(entries)}")
            for e in entries:
                if not (isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], dict)):
                    raise ValueError(f"{name} entries must be (name, kwargs) pairs, got {short_repr(e)}")
            object.__setattr__(self, name, tuple((n, kw) for n, kw in entries))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        make_optimizer(self.optimizer, self.lr, self.optimizer_kwargs)
        check_run(**{name: getattr(self, name) for name in (
            "task", "task_kwargs", "estimator", "estimator_kwargs", "advantage", "advantage_kwargs", "controllers",
            "frictions", "staleness", "steps", "history", "device")})
        devices = task_class(self.task).devices
        if self.device.split(":")[0] not in devices:
            raise ValueError(f"device: task {self.task!r} runs on {' or '.join(devices)}, got {self.device!r}")
        if self.staleness:
            self._check_delays()

    def _resolve_task_defaults(self) -> None:
        """advantage / optimizer / lr left as None take the task's declared defaults."""
        missing = [name for name in ("advantage", "optimizer", "lr") if getattr(self, name) is None]
        if missing:
            task = task_class(self.task)
            for name in missing:
                object.__setattr__(self, name, getattr(task, f"default_{name}"))

    def _check_delays(self) -> None:
        """A delay that cannot be drawn (geometric p = 5e-324: an infinite draw) fails here, not at step 0."""
        from sandbox.core.usage import paused

        with paused():  # a check: nothing noted for the job's fingerprints
            frictions = build_frictions(self.frictions, self.staleness)
        for step in sorted({0, 1, max(self.steps - 1, 0)}):
            try:
                frictions.delay(step, self.seed)
            except ArithmeticError as err:
                raise ValueError(f"staleness: its delay cannot be drawn at step {step} ({type(err).__name__}: {err}); "
                                 f"use settings whose delays are finite") from None

    def to_dict(self) -> dict[str, Any]:
        data = _freeze(dataclasses.asdict(self))
        if data["device"] == "cpu":  # CPU runs hash and store as they did before runs had a device
            del data["device"]
        if not data["optimizer_kwargs"]:  # likewise runs with the optimiser's defaults
            del data["optimizer_kwargs"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        if not isinstance(data, dict):
            raise ValueError(f"a RunConfig is read from a dict, got {type(data).__name__}")
        data = dict(data)  # [[name, kwargs], …] lists (JSON has no tuples) become tuples in __post_init__
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown RunConfig field(s) {unknown}; valid: {sorted(known)}")
        return cls(**data)

    @property
    def run_id(self) -> str:
        """sha256 of the canonical config without the label: equal configs share results."""
        payload = self.to_dict()
        payload.pop("label")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)
