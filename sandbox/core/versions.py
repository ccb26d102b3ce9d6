"""``Versions``: which parameter version decodes each position of a rollout — shared by the policies'
decode loop (``sandbox.policies.decode``), the frictions that resume a rollout under newer
parameters (``sandbox.frictions.partial``) and the task, so that none of them imports another."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class Versions:
    """The version that decodes each position (``stamps``, one per position) and the parameters of
    every stamped version (whatever the policy's stepper takes: population tensors, a module)."""

    stamps: tuple[int, ...]
    params: Mapping[int, Any]

    def __post_init__(self) -> None:
        if not self.stamps:
            raise ValueError("stamps must name the version of at least one position, got none")
        missing = sorted(set(self.stamps) - set(self.params))
        if missing:
            raise ValueError(f"params must hold every stamped version, missing {missing}")

    @classmethod
    def single(cls, params: Any, length: int, version: int = 0) -> Versions:
        """An ordinary rollout: ``params`` decode all ``length`` positions."""
        return cls((version,) * length, {version: params})

    @property
    def first(self) -> Any:
        """The parameters of the first position's version (the one the rollout started with)."""
        return self.params[self.stamps[0]]

    def stamp(self, shape: Sequence[int]) -> Tensor:
        """The version of every position, ``[..., T]`` long."""
        return torch.tensor(self.stamps, dtype=torch.long).expand(*shape).clone()


__all__ = ["Versions"]
