"""Where stale versions live: a ring of parameter snapshots, or a queue of eager rollouts.

``ParameterHistory`` keeps only the versions the friction stack's delay schedule can still ask for — a ring of
``max_delay + 1`` snapshots. For large fixed delays on models larger than a batch, ``RolloutQueue``
keeps the *rollouts* instead, sampled eagerly while their parameters are current: D small batches
instead of D models. Rollout randomness derives from (seed, step), so both give the same numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from torch import Tensor

from sandbox.core.validation import check_range
from sandbox.frictions.base import FrictionStack


class ParameterHistory:
    """A ring of parameter snapshots, keyed by learner version; holds at most ``capacity``."""

    def __init__(self, capacity: int) -> None:
        check_range("capacity", capacity, low=1)
        self.capacity = int(capacity)
        self._snapshots: OrderedDict[int, list[Tensor]] = OrderedDict()

    def push(self, version: int, params: Sequence[Tensor]) -> None:
        if self.capacity == 1:
            self._snapshots.clear()
        elif len(self._snapshots) >= self.capacity:
            self._snapshots.popitem(last=False)
        self._snapshots[int(version)] = [p.detach().clone() for p in params]

    def get(self, version: int) -> list[Tensor]:
        if version not in self._snapshots:
            held = list(self._snapshots)
            raise ValueError(f"version {version} is not in the parameter history (holding {held[:1]}…{held[-1:]})")
        return self._snapshots[version]

    def __len__(self) -> int:
        return len(self._snapshots)

    def __contains__(self, version: int) -> bool:
        return int(version) in self._snapshots

    def versions(self) -> list[int]:
        """The versions held, oldest first."""
        return list(self._snapshots)

    def state_dict(self) -> dict:
        return {"snapshots": dict(self._snapshots)}

    def load_state_dict(self, state: dict) -> None:
        self._snapshots = OrderedDict(state["snapshots"])

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for snap in self._snapshots.values() for t in snap)


class RolloutQueue:
    """Eager sampling for delays: at version v, sample now every future step t with t − d_t = v.

    ``fill(version, sample)`` calls ``sample(step)`` for those steps (parameters are current);
    ``pop(step)`` returns the rollout for ``step``. Holds at most max_delay + 1 rollouts. ``stack``
    gives d_t (``FrictionStack.delay``).
    """

    def __init__(self, stack: FrictionStack, seed: int, steps: int) -> None:
        self.stack, self.seed, self.steps = stack, seed, steps
        self._pending: dict[int, object] = {}
        self._next = 0  # first step whose rollout has not been scheduled yet
        self._due: dict[int, list[int]] = {}

    def _schedule_until(self, horizon: int) -> None:
        while self._next <= min(horizon, self.steps - 1):
            t = self._next
            self._due.setdefault(t - self.stack.delay(t, self.seed), []).append(t)
            self._next += 1

    def fill(self, version: int, sample: Callable[[int], object]) -> None:
        self._schedule_until(version + self.stack.max_delay)
        for t in self._due.pop(version, []):
            self._pending[t] = sample(t)

    def pop(self, step: int) -> object:
        if step not in self._pending:
            raise ValueError(f"no rollout was sampled for step {step}")
        return self._pending.pop(step)

    def __len__(self) -> int:
        return len(self._pending)

    def nbytes(self) -> int:
        total = 0
        for rollout in self._pending.values():
            for value in vars(rollout).values():
                if isinstance(value, Tensor):
                    total += value.numel() * value.element_size()
        return total

    def state_dict(self) -> dict:
        return {"pending": dict(self._pending), "next": self._next, "due": {k: list(v) for k, v in self._due.items()}}

    def load_state_dict(self, state: dict) -> None:
        self._pending, self._next = dict(state["pending"]), int(state["next"])
        self._due = {k: list(v) for k, v in state["due"].items()}
