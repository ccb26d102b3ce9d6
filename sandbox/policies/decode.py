"""One decode loop for every policy family, and one teacher-forced scorer.

At position t the policy's stepper gives the next-token logits z_t = ``steps(θ_{v_t}, a_<t)`` under
the parameters of the version v_t that decodes t (``Versions``: one version for an ordinary
rollout, several for a rollout resumed under newer parameters — AReaL's interruptible generation,
slime's partial rollouts). A KV-cached stepper runs only the newest token; a teacher-forced one the
whole prefix, so any version may decode any position. The actor's ``SamplingChain`` turns z_t into
the distribution p_t drawn from (``sandbox.core.sampling``), a uniform u_t gives
a_t = CDF_t⁻¹(u_t), and the position records log p_t(a_t) and its version v_t.

``teacher_forced`` scores any tokens under the same actor: log p_t(a_t | prompt, a_<t) with position
t under θ_{v_t}, through the same chain, so a sampler and its scorer cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sandbox.core.sampling import SamplingChain, draw
from sandbox.core.validation import on_host
from sandbox.core.versions import Versions

#: ``steps(params, tokens [..., t]) → logits [..., V]`` of position t (t = 0: after the prompt alone)
Steps = Callable[[Any, Tensor], Tensor]
#: ``uniforms(t, probs [..., V]) → u [..., 1]`` in [0, 1), the draw of position t
Uniforms = Callable[[int, Tensor], Tensor]
LogpFn = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Decoded:
    """Tokens ``actions [..., T]`` (``pad`` after EOS), the log-probs they were drawn with (0 after
    EOS), the ``versions`` that decoded them and, when kept, every position's log-probs
    ``log_probs [..., T, V]``."""

    actions: Tensor
    logp: Tensor
    versions: Versions
    log_probs: Tensor | None = None

    @property
    def version(self) -> Tensor:
        """The version of every token, ``[..., T]``."""
        return self.versions.stamp(self.actions.shape).to(self.actions.device)


def upfront(uniforms: Tensor) -> Uniforms:
    """Uniforms drawn before decoding, ``[..., T]``; position t reads ``uniforms[..., t]``."""
    return lambda t, probs: uniforms[..., t : t + 1]


def fresh(generator: torch.Generator, dtype: torch.dtype | None = None) -> Uniforms:
    """One uniform per row at each position, drawn once its distribution is known (in ``dtype``,
    default the probabilities', on the generator's device, then moved to the rows')."""
    def uniforms(t: int, probs: Tensor) -> Tensor:
        u = torch.rand(probs.shape[:-1] + (1,), generator=generator, dtype=dtype or probs.dtype)
        return u.to(probs.device, probs.dtype)
    return uniforms


def decode(steps: Steps, versions: Versions, chain: SamplingChain, uniforms: Uniforms, rows: Sequence[int], *,
           device: torch.device | str | None = None, dtype: torch.dtype | None = None, eos: int | None = None,
           pad: int = 0, keep: bool = False) -> Decoded:
    """Decode T = ``len(versions.stamps)`` tokens for each of the ``rows`` (module docstring).

    With ``eos`` a row stops at its first EOS (kept); later positions hold ``pad`` with log-prob 0,
    and decoding ends once every row has stopped (asked of the host on the CPU only: on an
    accelerator all T positions are decoded, the stopped rows' as pads). Log-probs are recorded in ``dtype`` (default: the
    chain's); ``keep`` records every position's log-probs."""
    T = len(versions.stamps)
    actions = torch.full((*rows, T), pad, dtype=torch.long, device=device)
    logp = done = None
    kept = []
    for t in range(T):
        log_probs, probs = chain.distribution(steps(versions.params[versions.stamps[t]], actions[..., :t]))
        token = draw(probs, uniforms(t, probs))
        lp = log_probs.gather(-1, token.unsqueeze(-1)).squeeze(-1)
        if logp is None:
            logp = torch.zeros(actions.shape, dtype=dtype or lp.dtype, device=lp.device)
        if eos is not None:
            done = torch.zeros_like(token, dtype=torch.bool) if done is None else done
            token, lp = torch.where(done, pad, token), torch.where(done, 0.0, lp)
            done = done | (token == eos)
        actions[..., t], logp[..., t] = token, lp
        if keep:
            kept.append(log_probs)
        if done is not None and t + 1 < T and on_host(done) and bool(done.all()):  # off the host: no wait, decode on
            break
    return Decoded(actions, logp, versions, torch.stack(kept, -2) if keep else None)


def teacher_forced(log_probs_of: Callable[[Any, Tensor], Tensor], versions: Versions, drawn: Decoded | None = None,
                   mask_of: Callable[[Tensor], Tensor] | None = None) -> LogpFn:
    """``logp_of(actions) → [..., T]``: log p_t(a_t | prompt, a_<t) with position t under its
    version's parameters, from ``log_probs_of(params, actions) → [..., T, V]`` (the policy's
    teacher-forced logits through the actor's chain). Rows equal to ``drawn``'s keep the log-probs
    they were drawn with (None: every row is recomputed); 0 outside ``mask_of(actions)``."""
    def logp_of(actions: Tensor) -> Tensor:
        same = None if drawn is None else (actions == drawn.actions).all(-1, keepdim=True)
        if same is not None and on_host(same) and bool(same.all()):
            return drawn.logp
        stamps, out = torch.tensor(versions.stamps), None
        for v in sorted(set(versions.stamps)):
            lp = log_probs_of(versions.params[v], actions).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            out = lp if out is None else torch.where(stamps.to(lp.device) == v, lp, out)
        if same is not None:
            out = torch.where(same, drawn.logp, out)
        return out if mask_of is None else out.masked_fill(~mask_of(actions), 0.0)
    return logp_of


__all__ = ["Decoded", "LogpFn", "Steps", "Uniforms", "Versions", "decode", "fresh", "teacher_forced", "upfront"]
