"""The actor: the one sampling path of every task through the friction stack (DESIGN.md, data flow).

    batch → friction context → actor params (frictions) → sampling chain (temperature, logit and
    probability hooks, ε) → policy sample → row overrides (composed mixtures) → reward → reward
    frictions → Rollout

``behavior_logp`` is what the actor reports, ``true_behavior_logp`` the log-prob under what it
really sampled from; because the chain and the override mixtures are composed here, once, the two
are right for any stack of frictions. An objective that ``enumerates`` (the exact expectation,
``sandbox.objectives.exact``) collects its own rollout instead: every action of every context with
its weight μ/n, through the same friction context and chain (no sampling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from sandbox.core.rollout import Rollout
from sandbox.frictions.base import FrictionStack, Sample
from sandbox.tasks.base import PolicySample, Task

#: the parameters of a held version (the loop's parameter history)
VersionLookup = Callable[[int], Sequence[Tensor]]


def collect(task: Task, actor_params: Sequence[Tensor], version: int, generator: torch.Generator,
            seed: int, params_of: VersionLookup | None = None, latest: int | None = None) -> Rollout:
    """Sample one batch of ``task`` (under its friction stack) with the actor's (possibly stale)
    parameters, stamped ``version``; ``seed`` is the run's (for per-run friction draws).

    ``params_of(v)`` gives the parameters of any held version v ≤ ``latest`` (the newest): frictions
    that resume a sequence with newer weights (``resumes_versions``) need both. When a friction
    makes the actor report another distribution than it samples, the reported log-probs come from
    the chain's ``reporting()`` twin replayed from the same generator state (the same uniforms and
    friction noise, so the same tokens: checked)."""
    frictions = task.frictions
    if task.objective.enumerates:
        return task.objective.collect(task, actor_params, version, generator, seed)
    resumer = require_versions(frictions, params_of, latest)
    batch = task.draw_batch(generator)
    ctx = task.friction_context(batch, seed)
    with torch.no_grad():
        params = frictions.actor_params(list(actor_params), ctx) if frictions else list(actor_params)
        chain = frictions.sampling_chain(ctx, generator, task.temperature, task.eps_mix)
        replay = None if chain.reports_sampled else torch.Generator().set_state(generator.get_state())
        if resumer is None:
            drawn = task.sample(params, batch, chain, generator)
            versions = torch.full(drawn.actions.shape, int(version), dtype=torch.long)
        else:
            *drawn, versions = resumer.sample(task, batch, chain, generator, version, latest,
                                              lambda v: frictions.actor_params(list(params_of(v)), ctx))
            drawn = PolicySample(*drawn)
        reported = drawn.logp
        if replay is not None:
            if resumer is not None:
                raise ValueError(f"friction {resumer.name!r} does not compose with frictions that report another "
                                 "distribution than they sample")
            twin = frictions.sampling_chain(ctx, replay, task.temperature, task.eps_mix).reporting()
            again = task.sample(params, batch, twin, replay)
            if not torch.equal(again.actions, drawn.actions):
                raise RuntimeError("the reporting replay drew other tokens than the sampler")
            reported = again.logp
        sample, replaced = frictions.override(Sample(drawn.actions, reported, drawn.logp), ctx, generator,
                                              policy_logp=drawn.logp_of)
        rewards = task.reward(batch, sample.actions, generator)
        rewards = frictions.reward(rewards, sample, ctx, generator, replaced)
        mask = task.token_mask(batch, sample.actions)
    extras = task.rollout_extras(batch, ctx, actor_params, params, drawn)
    extras.update({f"replaced_{name}": rows for name, rows in replaced.items()})
    zero = torch.zeros((), dtype=sample.behavior_logp.dtype)
    return Rollout(
        obs=batch.obs,
        actions=sample.actions,
        mask=mask,
        behavior_logp=torch.where(mask, sample.behavior_logp, zero),
        true_behavior_logp=torch.where(mask, sample.true_logp, zero),
        rewards=rewards,
        group=batch.group,
        version=versions.to(sample.actions.device),
        extras=extras,
    )


def require_versions(frictions: FrictionStack, params_of: VersionLookup | None, latest: int | None):
    """The friction that resumes sequences with newer weights (``resumes_versions``), or None; it
    needs ``params_of`` and ``latest``, which only the simulated loop with history='params' has."""
    resumer = next((f for f in frictions.frictions if f.resumes_versions), None)
    if resumer is not None and (params_of is None or latest is None):
        raise ValueError(f"frictions: {resumer.name!r} resumes sequences with newer weights: the actor needs every held "
                         "version (params_of, latest), which only the simulated loop with history='params' has, not the "
                         "Ray runtime's workers")
    return resumer
