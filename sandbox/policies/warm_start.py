"""A warm start, as LLM RL has: a policy first trained by supervised fine-tuning on solution
traces, RL then starting from that checkpoint (issue 42; docs/regime.md).

``WarmStarted(inner, traces, key, steps, lr, prompts)`` is ``inner`` whose ``init`` runs SFT after
``inner.init``: it minimises the mean negative log-likelihood of the traces' answers over their
valid tokens (up to and including EOS), teacher-forced through ``inner``'s one scorer,

    L(θ) = −Σ_{b,t} m_{bt} log π_θ(y*_{bt} | x_b, y*_{b,<t}) / Σ_{b,t} m_{bt}   (per population member)

with Adam at ``lr`` for ``steps`` steps of ``prompts`` fresh traces each (Adam is elementwise, so
one ``torch.optim.Adam`` over ``[S, ...]`` tensors trains the S members independently). Stopped
early, the policy answers easy prompts confidently and hard ones not, and puts almost no mass on
the tokens the traces never use — a real low-probability tail. ``traces(n, generator)`` gives
``(obs, answers, mask)``: the environment's side of the composition (the policy imports none).

The checkpoint is cached in ``$SANDBOX_RESULTS/warm_starts`` (default ``results/warm_starts``) under a
fingerprint of everything it depends on — the SFT knobs, ``key`` (what the traces are: the
problem), the inner policy, the starting parameters, the SFT seed and the source of the modules
that compute it or make its traces — so a cached checkpoint is the one SFT would compute. One draw of the run's
generator seeds the SFT, with or without the cache.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from sandbox.core.validation import check_int, check_range
from sandbox.policies.base import Policy

#: ``traces(n, generator) → (obs, answers [S, n, T], mask [S, n, T])``
Traces = Callable[[int, torch.Generator], tuple[Any, Tensor, Tensor]]


@dataclass(frozen=True, eq=False)
class WarmStarted(Policy):
    """``inner`` warm-started by ``steps`` Adam steps of SFT at ``lr`` on ``prompts`` traces a step
    (module docstring); every other call is ``inner``'s."""

    inner: Policy
    traces: Traces = field(repr=False)
    key: str = ""  # what the traces are (the problem), for the cache's fingerprint
    steps: int = 300
    lr: float = 1e-3
    prompts: int = 64
    sources: tuple[str, ...] = ()  # the modules that make the traces, their source in the fingerprint

    def __post_init__(self) -> None:
        check_int("sft_steps", self.steps, low=0, high=1_000_000)
        check_range("sft_lr", self.lr, low=0.0, low_open=True, high=1.0)
        check_int("sft_prompts", self.prompts, low=1, high=1 << 16)

    # ------------------------------------------------------------------ the inner policy's calls
    @property
    def n_actions(self) -> int:  # type: ignore[override]
        return self.inner.n_actions

    @property
    def resumable(self) -> bool:  # type: ignore[override]
        return self.inner.resumable

    @property
    def devices(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.inner.devices

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self.inner.device

    @device.setter
    def device(self, device: torch.device) -> None:
        object.__setattr__(self.inner, "device", device)

    def sample(self, params, obs, chain, generator, versions=None):
        return self.inner.sample(params, obs, chain, generator, versions)

    def score(self, params, obs, actions):
        return self.inner.score(params, obs, actions)

    def token_logits(self, params, obs, actions):
        return self.inner.token_logits(params, obs, actions)

    def sampler_mismatch(self, obs, actor_params, params, sample):
        return self.inner.sampler_mismatch(obs, actor_params, params, sample)

    # ------------------------------------------------------------------ the warm start
    def init(self, population: int, generator: torch.Generator) -> list[Tensor]:
        """``inner``'s fresh parameters, then SFT on the traces (cached; module docstring)."""
        params = [p.to(self.device) for p in self.inner.init(population, generator)]  # SFT where the run is
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        if self.steps == 0:
            return params
        path = cache_root() / f"{self.fingerprint(params, seed)}.pt"
        if path.exists():
            try:
                cached = torch.load(path, weights_only=True)
                if len(cached) == len(params) and all(c.shape == p.shape for c, p in zip(cached, params)):
                    return [c.to(p.device, p.dtype) for c, p in zip(cached, params)]
            except (OSError, RuntimeError, EOFError):  # a damaged file is recomputed
                pass
        out = self.train(params, torch.Generator().manual_seed(seed))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        torch.save([p.cpu() for p in out], tmp)
        os.replace(tmp, path)
        return out

    def train(self, params: Sequence[Tensor], generator: torch.Generator) -> list[Tensor]:
        """SFT of ``params`` ``[S, ...]`` on traces drawn from ``generator`` (module docstring)."""
        params = [p.detach().clone().requires_grad_(True) for p in params]
        optimizer = torch.optim.Adam(params, lr=self.lr)
        for _ in range(self.steps):
            obs, answers, mask = self.traces(self.prompts, generator)
            logp = self.inner.score(params, obs, answers)
            nll = -(logp * mask).sum((-2, -1)) / mask.sum((-2, -1))  # [S]: members train independently
            optimizer.zero_grad(set_to_none=True)
            nll.sum().backward()
            optimizer.step()
        return [p.detach() for p in params]

    def fingerprint(self, params: Sequence[Tensor], seed: int) -> str:
        """sha256 of the SFT knobs, ``key``, the inner policy, the starting parameters, the SFT seed
        and the source of the modules that compute a checkpoint or make its traces (``sources``)."""
        digest = hashlib.sha256(repr((self.steps, self.lr, self.prompts, self.key, repr(self.inner), seed,
                                      [tuple(p.shape) for p in params])).encode())
        for p in params:
            digest.update(p.detach().cpu().contiguous().numpy().tobytes())
        modules = {type(self.inner).__module__, __name__, "sandbox.policies.decode", *self.sources}
        for name in sorted(modules):
            digest.update(inspect.getsource(sys.modules[name]).encode())
        return digest.hexdigest()[:20]


def cache_root() -> Path:
    """Where warm starts are cached: ``$SANDBOX_RESULTS/warm_starts`` (default ``results/warm_starts``)."""
    return Path(os.environ.get("SANDBOX_RESULTS") or "results") / "warm_starts"


__all__ = ["Traces", "WarmStarted", "cache_root"]
