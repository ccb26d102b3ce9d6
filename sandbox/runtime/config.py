"""A run's configuration: one dataclass, JSON-serialisable, whose hash names its results."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sandbox.core.validation import check_choice, check_range

PROXIMAL = ("auto", "behavior", "recompute")
HISTORY = ("params", "rollouts")


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
        advantage, advantage_kwargs: registered baseline.
        controllers: ((name, kwargs), …) applied in order between backward and optimiser.
        optimizer: 'adam' | 'sgd' | 'normalized'; lr: its step size.
        staleness: DelaySchedule fields ({} = synchronous).
        frictions: ((name, kwargs), …) actor and reward frictions.
        proximal: π_prox = μ ('behavior'), the learner's own log-probs at the start of the update
            ('recompute'), or 'auto' (recompute for decoupled_ppo, μ otherwise).
        history: keep stale 'params' (a ring of snapshots) or eager 'rollouts' (a queue).
        seed: the run seed; every random draw derives from it.
        steps: learner updates; log_points: size of the logarithmic logging schedule.
        label: a display name (not part of the hash).
    """

    task: str = "bandit"
    task_kwargs: dict = field(default_factory=dict)
    estimator: str = "reinforce"
    estimator_kwargs: dict = field(default_factory=dict)
    advantage: str = "group_mean"
    advantage_kwargs: dict = field(default_factory=dict)
    controllers: tuple = ()
    optimizer: str = "adam"
    lr: float = 1e-3
    staleness: dict = field(default_factory=dict)
    frictions: tuple = ()
    proximal: str = "auto"
    history: str = "params"
    seed: int = 0
    steps: int = 100
    log_points: int = 30
    label: str = ""

    def __post_init__(self) -> None:
        check_range("steps", self.steps, low=0)
        check_range("log_points", self.log_points, low=1)
        check_range("seed", self.seed, low=0)
        check_choice("proximal", self.proximal, PROXIMAL)
        check_choice("history", self.history, HISTORY)
        for name in ("controllers", "frictions"):
            for entry in getattr(self, name):
                if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[1], dict)):
                    raise ValueError(f"{name} entries must be (name, kwargs) pairs, got {entry!r}")

    def to_dict(self) -> dict[str, Any]:
        return _freeze(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        data = dict(data)
        for name in ("controllers", "frictions"):
            data[name] = tuple((n, dict(k)) for n, k in data.get(name, ()))
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
