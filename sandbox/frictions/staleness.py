"""Staleness: the actor samples with the learner's parameters from s_t steps ago.

A delay schedule gives the realised staleness s_t of every learner step t; it is the first stage
of the friction stack (``FrictionStack.schedule``), built from ``RunConfig.staleness`` and
validated here, once. It composes three parts, each a property of the schedule that the simulated
loop (``sandbox.runtime.history`` keeps the versions it needs) and the Ray runtime
(``sandbox.runtime.ray_async``, which starts the rollout of step t with version t − s_t) realise
alike, so one config gives the same realised staleness in both (bit for bit: tested by
``tests/runtime/test_ray_staleness.py::test_simulated_and_ray_realise_the_same_staleness``):

- a registered delay kind (``sandbox.frictions.delays``): d_t ≤ D, drawn from (seed, t);
- a registered admission rule (``sandbox.frictions.admissions``) with its ``budget`` b: 'pace'
  caps d_t so no rollout is staler than b (the actor waits; Ray's bounded mode), 'drop' and 'mask'
  filter rows or tokens staler than b at the learner;
- the broadcast period k (``broadcast_every``): weights are published every k learner steps, so the
  actor of step t samples with the newest published version v_t = k·⌊(t − d_t)/k⌋ and
  s_t = t − v_t ∈ [d_t, d_t + k − 1]. k = 1 (the default) is s_t = d_t.

D = 0 and k = 1 reproduce the synchronous loop bit for bit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import Tensor

from sandbox.core.plugins import load_env_plugins, plugins_from_env
from sandbox.core.rollout import Rollout
from sandbox.core.validation import check_choice, check_field_types, check_int, check_range
from sandbox.frictions.admissions import (
    ADMISSION_RULES,
    Admission,
    AdmissionLedger,
    admission_names,
)
from sandbox.frictions.delays import DELAYS, Delay, delay_kinds

#: the built-in delay kinds and admission rules (plugins add to ``DELAYS`` and ``ADMISSION_RULES``)
DELAY_KINDS = delay_kinds()
ADMISSIONS = admission_names()


@dataclass(frozen=True)
class DelaySchedule:
    """The staleness of a run: a registered delay kind, a registered admission rule and the
    broadcast period (module docstring).

    kind: a delay kind of ``DELAYS`` — 'none' (d = 0, the synchronous loop), 'fixed' (d = D),
    'uniform' (d ~ U{0..D}), 'geometric' (d ~ Geometric(p) − 1 capped at D), 'per_actor' (N actors
    round-robin: d = (t mod N)·D // N) — or a plugin's. Always s_t ≤ t (no actor runs ahead of
    step 0). D > 0 needs a kind that delays (else the synchronous loop would run silently).
    ``admission`` (a rule of ``ADMISSION_RULES``) and ``budget`` (None: no budget, every rollout
    admitted as it is); ``broadcast_every`` k ≥ 1. ``options``: a plugin kind's or rule's own fields
    (``from_dict`` puts a config's extra keys there).
    """

    kind: str = "none"
    D: int = 0  # maximum delay, ≥ 0
    p: float = 0.5  # geometric success probability in (0, 1]
    n_actors: int = 1  # per_actor: number of actors, ≥ 1
    admission: str = "pace"  # 'pace' | 'drop' | 'mask' (with a budget), or a plugin's
    budget: int | None = None  # staleness budget b ≥ 0; None = none
    broadcast_every: int = 1  # k: weights are published every k learner steps
    options: dict = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_choice("staleness kind", self.kind, _registered(DELAYS, self.kind))
        check_int("D", self.D, low=0)
        check_range("p", self.p, low=0.0, high=1.0, low_open=True)
        check_int("n_actors", self.n_actors, low=1)
        check_int("broadcast_every", self.broadcast_every, low=1)
        delay_cls = DELAYS.get(self.kind)
        if not delay_cls.delays and self.D > 0:
            kinds = ", ".join(k for k in delay_kinds() if DELAYS.get(k).delays)
            raise ValueError(f"staleness D={self.D} needs a kind: set staleness.kind to one of {kinds} "
                             "(kind 'none' is the synchronous loop)")
        check_choice("admission", self.admission, _registered(ADMISSION_RULES, self.admission))
        object.__setattr__(self, "_delay", _build(delay_cls, self))
        rule = _build(ADMISSION_RULES.get(self.admission), self)
        rule.check_broadcast(self.broadcast_every)
        object.__setattr__(self, "_rule", rule)

    @classmethod
    def from_dict(cls, fields: dict | DelaySchedule | None) -> DelaySchedule:
        """The schedule of ``RunConfig.staleness`` ({} or None: synchronous); unknown or mistyped
        fields raise one ``ValueError`` line. Keys that are fields of the chosen delay kind or
        admission rule but not of the schedule (a plugin's) go to ``options``."""
        if isinstance(fields, DelaySchedule):
            return fields
        fields = dict(fields or {})
        known = {f.name for f in dataclasses.fields(cls) if f.name != "options"}
        extra = set(fields) - known
        if extra:
            kind, admission = fields.get("kind", cls.kind), fields.get("admission", cls.admission)
            check_choice("staleness kind", kind, _registered(DELAYS, kind))
            check_choice("admission", admission, _registered(ADMISSION_RULES, admission))
            stages = (DELAYS.get(kind), ADMISSION_RULES.get(admission))
            own = {f.name for stage in stages for f in dataclasses.fields(stage)}
            if extra - own:
                raise ValueError(f"unknown field(s) {sorted(extra - own)}; valid: {sorted(known | own)}")
        check_field_types(cls, {k: v for k, v in fields.items() if k in known})
        return cls(**{k: v for k, v in fields.items() if k in known},
                   options={k: fields[k] for k in sorted(extra)})

    @property
    def delay_stage(self) -> Delay:
        """The registered delay kind, built from this schedule's fields."""
        return self._delay

    @property
    def rule(self) -> Admission:
        """The registered admission rule, built from this schedule's fields."""
        return self._rule

    @property
    def paces(self) -> bool:
        return self.budget is not None and self.rule.paces

    @property
    def max_delay(self) -> int:
        """The largest realised staleness s_t: the stale versions a runtime must keep."""
        return self.rule.cap(self.delay_stage.maximum, self.broadcast_every) + self.broadcast_every - 1

    def delay(self, step: int, seed: int) -> int:
        """s_t for learner step ``step``: t − k·⌊(t − cap(d_t))/k⌋, at most t."""
        d = min(self.rule.cap(self.delay_stage.draw(step, seed), self.broadcast_every), step)
        k = self.broadcast_every
        return step - (step - d) // k * k

    def version(self, step: int, seed: int) -> int:
        """v_t = t − s_t: the published version the actor of ``step`` samples with (a multiple of k)."""
        return step - self.delay(step, seed)

    def check_steps(self, steps: int) -> None:
        """Refuse a run of ``steps`` steps that the delay kind would never delay."""
        self.delay_stage.check_steps(steps)

    def admit(self, rollout: Rollout, step: int) -> tuple[Rollout, Tensor | None]:
        """The rollout as the learner admits it at ``step`` (``Admission.admit``)."""
        return self.rule.admit(rollout, step)

    def ledger(self, population: int, device="cpu") -> AdmissionLedger:
        """A run's admission at the learner with its running accounting."""
        return AdmissionLedger(self.rule, population, device)


def _registered(registry, name) -> tuple[str, ...]:
    """The registry's names in order, after importing ``$SANDBOX_PLUGINS`` when ``name`` is not
    among them yet (a plugin's kind or rule is known once its module is imported)."""
    if isinstance(name, str) and name not in registry and plugins_from_env():
        load_env_plugins()
    return registry.in_order()


def _build(stage: type, schedule: DelaySchedule):
    """A delay kind or admission rule from the schedule's fields (and ``options``) it declares."""
    values = {**{f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}, **schedule.options}
    return stage(**{f.name: values[f.name] for f in dataclasses.fields(stage) if f.init and f.name in values})
