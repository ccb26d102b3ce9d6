"""Explicit randomness: every draw comes from a generator derived from (seed, stream, step)."""

from __future__ import annotations

import hashlib

import torch


def derived_generator(seed: int, *keys: object) -> torch.Generator:
    """A CPU generator seeded by a stable hash of (seed, *keys).

    The randomness of, say, the rollout of step t is the same whenever and wherever it is drawn,
    which makes eager and lazy staleness, resumed runs and Ray workers agree bit for bit.
    """
    digest = hashlib.sha256(repr((int(seed),) + tuple(keys)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
