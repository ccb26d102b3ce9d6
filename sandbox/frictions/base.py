"""Frictions: composable, seeded transforms of the actor and of the reward.

A friction never edits an environment or a policy: the actor calls its hooks while sampling. The
stack is one pipeline, from the version the actor samples with to what the learner admits:

    delay (the schedule: the actor samples with version t − d_t)
    → params → actor_params → logits → actor_logits → probs → actor_probs → sample
                                                      probs → actor_reported_probs → reported μ
           → override (replace rows: landmine, rare discovery) → reward (corruption)
           → admit (the schedule's admission: pace, drop or mask what is staler than its budget)

Each friction is a frozen dataclass with a *strength* field that sweeps can vary, named by its
``strength`` class attribute; strength 0 (its ``identity``) is the identity, bit for bit. ``behavior_logp`` is what the actor reports, ``true_logp`` what it
really sampled from; bugs may make them differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import torch
from torch import Tensor

from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.core.sampling import SamplingChain
from sandbox.frictions.admissions import AdmissionLedger
from sandbox.frictions.staleness import DelaySchedule

FRICTIONS: Registry[Friction] = Registry("friction")


def register_friction(name: str, *, replace: bool = False):
    return FRICTIONS.register(name, replace=replace)


def make_friction(name: str, **kwargs) -> Friction:
    """``make_friction("logit_noise", sigma=1.0)``; unknown names or fields raise ``ValueError``."""
    return FRICTIONS.make(name, **kwargs)


@dataclass(frozen=True)
class Sample:
    """Per-row sample of an actor: tokens and both log-probs, shapes ``[*P, B, T]``."""

    actions: Tensor
    behavior_logp: Tensor
    true_logp: Tensor


@dataclass(frozen=True)
class FrictionContext:
    """What the environment tells frictions about the current batch.

    correct_actions: the correct answer per row ``[*P, B, T]`` (rare discovery), when known.
    wrong_actions: a fixed wrong answer per row ``[*P, B, T]`` (landmine), when defined.
    reward_range: (min, max) reward of the task (Bernoulli override).
    n_actions: vocabulary / arm count.
    seed: the run seed (for per-run fixed draws such as fixed logit noise).
    """

    n_actions: int
    reward_range: tuple[float, float] = (0.0, 1.0)
    correct_actions: Tensor | None = None
    wrong_actions: Tensor | None = None
    seed: int = 0


LogpFn = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Friction:
    """Base class: every hook is the identity."""

    name: ClassVar[str] = "friction"
    #: 'actor' frictions change what is sampled; 'reward' frictions change what is observed
    kind: ClassVar[str] = "actor"
    #: frictions that replace whole rows (``override``) and so cannot be enumerated exactly
    replaces_rows: ClassVar[bool] = False
    #: frictions that continue a sequence with newer weights: the actor calls their ``sample`` with a
    #: version → parameters lookup instead of the task's sampler (``sandbox.frictions.partial``)
    resumes_versions: ClassVar[bool] = False
    #: frictions that flip the label of a reward 1[a = y]: only a task that pays one takes them
    #: (``Task.label_reward``; ``RunConfig`` checks)
    needs_label_reward: ClassVar[bool] = False
    #: the field that holds the friction's strength (``strength = "p"``); None: always active
    strength: ClassVar[str | None] = None
    #: the strength at which the friction is the identity (``chunks = 1`` for partial rollouts)
    identity: ClassVar[float] = 0

    @property
    def active(self) -> bool:
        """False when the ``strength`` field is at its ``identity`` value: the stack then skips the
        friction, so it changes no number and draws nothing (a friction whose identity is not one
        field's value overrides this). A dataclass field called ``strength`` is its own strength."""
        if self.strength is None:
            return True
        value = getattr(self, self.strength) if isinstance(self.strength, str) else self.strength
        return value != self.identity

    def actor_params(self, params: Sequence[Tensor], ctx: FrictionContext) -> list[Tensor]:
        return list(params)

    def actor_logits(self, logits: Tensor, ctx: FrictionContext, generator: torch.Generator) -> Tensor:
        return logits

    def actor_probs(self, probs: Tensor, ctx: FrictionContext) -> Tensor:
        return probs

    def actor_reported_probs(self, probs: Tensor, ctx: FrictionContext) -> Tensor:
        """The distribution the actor *reports* for ``probs`` (default: the one it samples,
        ``actor_probs``); a friction whose engine samples one distribution but reports another
        overrides it (e.g. top-p sampling that reports the full softmax) and ``reports_sampled``."""
        return self.actor_probs(probs, ctx)

    @property
    def reports_sampled(self) -> bool:
        """False when ``actor_reported_probs`` differs from ``actor_probs`` (the actor then reports
        another distribution than it samples)."""
        return True

    def override(self, sample: Sample, ctx: FrictionContext, generator: torch.Generator,
                 policy_logp: LogpFn | None) -> tuple[Sample, Tensor | None]:
        """Replace whole rows; the second return value is the per-row bool of replaced rows (or
        None). ``policy_logp(actions)`` gives the per-token log-probs of the actor *before* this
        friction (its policy and every earlier friction), so true μ can be recorded exactly."""
        return sample, None

    def actor_logp(self, ctx: FrictionContext, policy_logp: LogpFn | None) -> LogpFn | None:
        """The per-token log-prob function of the actor *after* this friction, given the one before
        it (identity for frictions that replace no rows)."""
        return policy_logp

    def reward(self, rewards: Tensor, sample: Sample, ctx: FrictionContext, generator: torch.Generator,
               replaced: dict[str, Tensor]) -> Tensor:
        return rewards


class FrictionStack:
    """An ordered composition of frictions, applied by actors at each hook, behind one delay
    schedule (its first and last stages: ``delay`` picks the version the actor samples with,
    ``admit`` what of the rollout the learner takes); the same object in the simulated and the Ray
    runtimes."""

    def __init__(self, frictions: Sequence[Friction] = (), schedule: DelaySchedule | None = None) -> None:
        for f in frictions:
            if not isinstance(f, Friction):
                raise ValueError(f"frictions must be Friction instances, got {type(f).__name__}")
        if schedule is not None and not isinstance(schedule, DelaySchedule):
            raise ValueError(f"schedule must be a DelaySchedule, got {type(schedule).__name__}")
        self.frictions = [f for f in frictions if f.active]
        self.schedule = schedule or DelaySchedule()

    @classmethod
    def from_config(cls, spec: Sequence[tuple[str, dict]] | Sequence[Friction],
                    staleness: dict | DelaySchedule | None = None) -> FrictionStack:
        """The stack of ``RunConfig.frictions`` behind the schedule of ``RunConfig.staleness``."""
        items = []
        for entry in spec:
            if isinstance(entry, Friction):
                items.append(entry)
            else:
                name, kwargs = entry
                items.append(make_friction(name, **dict(kwargs)))
        return cls(items, DelaySchedule.from_dict(staleness))

    def __bool__(self) -> bool:
        """True when a friction changes what the actor samples or the reward (the schedule aside)."""
        return bool(self.frictions)

    @property
    def max_delay(self) -> int:
        """The largest d_t the schedule gives: the stale versions a runtime must keep."""
        return self.schedule.max_delay

    def delay(self, step: int, seed: int) -> int:
        """s_t: the actor of learner step ``step`` samples with version step − s_t."""
        return self.schedule.delay(step, seed)

    def admit(self, rollout: Rollout, step: int) -> tuple[Rollout, Tensor | None]:
        """The rollout as the learner admits it at ``step`` (``DelaySchedule.admit``)."""
        return self.schedule.admit(rollout, step)

    def ledger(self, population: int, device="cpu") -> AdmissionLedger:
        """The learner's admission with its running accounting (``DelaySchedule.ledger``)."""
        return self.schedule.ledger(population, device)

    def actor_params(self, params, ctx):
        for f in self.frictions:
            params = f.actor_params(params, ctx)
        return list(params)

    def actor_logits(self, logits, ctx, generator):
        for f in self.frictions:
            logits = f.actor_logits(logits, ctx, generator)
        return logits

    def actor_probs(self, probs, ctx):
        for f in self.frictions:
            probs = f.actor_probs(probs, ctx)
        return probs

    def actor_reported_probs(self, probs, ctx):
        for f in self.frictions:
            probs = f.actor_reported_probs(probs, ctx)
        return probs

    def _overrides(self, hook: str) -> bool:
        return any(getattr(type(f), hook) is not getattr(Friction, hook) for f in self.frictions)

    def sampling_chain(self, ctx: FrictionContext | None, generator: torch.Generator, temperature: float = 1.0,
                       eps: float = 0.0) -> SamplingChain:
        """The actor's per-position distribution (``sandbox.core.sampling``) with this stack's
        ``actor_logits`` and ``actor_probs`` hooks (and ``actor_reported_probs`` as the report hook
        when a friction does not report what it samples); a hook no friction overrides is left
        out, so a stack without them is the policy itself, bit for bit."""
        return SamplingChain(
            temperature=temperature, eps=eps,
            logits_hook=(lambda z: self.actor_logits(z, ctx, generator)) if self._overrides("actor_logits") else None,
            probs_hook=(lambda p: self.actor_probs(p, ctx)) if self._overrides("actor_probs") else None,
            report_hook=None if all(f.reports_sampled for f in self.frictions)
            else (lambda p: self.actor_reported_probs(p, ctx)),
        )

    def override(self, sample, ctx, generator, policy_logp: LogpFn | None = None):
        """Apply the row-replacing frictions in order. Each one sees the actor as composed so far
        (``policy_logp`` wrapped by every earlier friction's ``actor_logp``), so the recorded true
        μ of a composed stack is the mixture the rows were really drawn from."""
        replaced: dict[str, Tensor] = {}
        for f in self.frictions:
            sample, rows = f.override(sample, ctx, generator, policy_logp)
            if rows is not None:
                replaced[f.name] = rows
            policy_logp = f.actor_logp(ctx, policy_logp)
        return sample, replaced

    def reward(self, rewards, sample, ctx, generator, replaced):
        for f in self.frictions:
            rewards = f.reward(rewards, sample, ctx, generator, replaced)
        return rewards


def replace_rows(sample: Sample, rows: Tensor, actions: Tensor, reported_logp: float | Tensor,
                 true_logp: Tensor) -> Sample:
    """Put ``actions`` in the rows ``rows`` [*P, B] with the given reported and true log-probs
    (``reported_logp`` a scalar or a per-token tensor)."""
    r = rows.unsqueeze(-1)
    reported = torch.as_tensor(reported_logp, dtype=sample.behavior_logp.dtype, device=rows.device)
    return replace(
        sample,
        actions=torch.where(r, actions, sample.actions),
        behavior_logp=torch.where(r, reported.expand_as(sample.behavior_logp), sample.behavior_logp),
        true_logp=torch.where(r, true_logp, sample.true_logp),
    )
