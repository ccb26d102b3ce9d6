"""Delay kinds and admission rules are registered stages: capabilities are class attributes, a
plugin registers a new kind or rule (with its own fields) and a run uses it from its config; the
broadcast period is a property of the schedule that the simulated loop realises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from sandbox.frictions.admissions import (
    ADMISSION_RULES,
    Admission,
    admission_names,
    register_admission,
)
from sandbox.frictions.delays import DELAYS, Delay, delay_kinds, register_delay
from sandbox.frictions.staleness import ADMISSIONS, DELAY_KINDS, DelaySchedule
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, metrics_only, train


def test_built_in_kinds_and_rules_are_registered_with_their_capabilities():
    assert DELAY_KINDS == ("none", "fixed", "uniform", "geometric", "per_actor") == delay_kinds()[:5]
    assert ADMISSIONS == ("pace", "drop", "mask") == admission_names()[:3]
    assert [DELAYS.get(k).delays for k in DELAY_KINDS] == [False, True, True, True, True]
    assert [(ADMISSION_RULES.get(a).paces, ADMISSION_RULES.get(a).filters) for a in ADMISSIONS] == [
        (True, False), (False, True), (False, True)]
    schedule = DelaySchedule("geometric", D=6, p=0.3, admission="drop", budget=2)
    assert schedule.delay_stage == DELAYS.get("geometric")(D=6, p=0.3)
    assert schedule.rule == ADMISSION_RULES.get("drop")(budget=2)


@pytest.fixture
def plugins():
    """A delay kind and an admission rule as a plugin registers them (removed afterwards)."""

    @register_delay("every_other")
    @dataclass(frozen=True)
    class EveryOther(Delay):
        """d = D on odd steps, 0 on even ones."""

        def draw(self, step: int, seed: int) -> int:
            return self.D * (step % 2)

    @register_admission("mask_older")
    @dataclass(frozen=True)
    class MaskOlder(Admission):
        """tokens staler than budget + slack are masked out"""

        filters: ClassVar[bool] = True
        needs_budget: ClassVar[bool] = True
        slack: int = 0

        def fresh(self, rollout, step):
            return rollout.staleness(step) <= self.budget + self.slack

    yield EveryOther, MaskOlder
    DELAYS._entries.pop("every_other", None)
    ADMISSION_RULES._entries.pop("mask_older", None)


def _config(**staleness):
    return RunConfig(task="bandit", task_kwargs=dict(K=4, N=3, batch_size=4, population=2), estimator="tis",
                     steps=12, log_points=3, lr=0.05, staleness=staleness)


def test_a_plugin_registers_a_delay_kind_and_an_admission_rule(plugins):
    assert "every_other" in delay_kinds() and "mask_older" in admission_names()
    schedule = DelaySchedule.from_dict({"kind": "every_other", "D": 3, "admission": "mask_older", "budget": 1,
                                        "slack": 1})
    assert [schedule.delay(t, 0) for t in range(6)] == [0, 1, 0, 3, 0, 3] and schedule.max_delay == 3
    assert schedule.rule.slack == 1 and schedule.options == {"slack": 1}
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['slak'\]; valid: .*'slack'"):
        DelaySchedule.from_dict({"kind": "every_other", "admission": "mask_older", "budget": 1, "slak": 1})
    with pytest.raises(ValueError, match="admission='mask_older' needs a budget"):
        DelaySchedule.from_dict({"kind": "every_other", "admission": "mask_older"})
    # a run takes it from its config: staleness 3 on odd steps, masked beyond budget + slack = 2
    config = _config(kind="every_other", D=3, admission="mask_older", budget=1, slack=1)
    learner = ActorLearner(config)
    for step in range(6):
        rollout = learner.rollout(step)
        assert int((step - rollout.version).max()) == [0, 1, 0, 3, 0, 3][step]
        admitted, dropped = learner.frictions.admit(rollout, step)
        assert bool(admitted.mask.any()) == (step not in (3, 5)) and dropped is not None
        learner.update(step, rollout)
        learner.publish(step + 1)
    frame = train(config)
    assert frame["prompts_dropped_frac"].dropna().iloc[-1] == pytest.approx(5 / 12)  # steps 3, 5, 7, 9, 11 of 12


def test_a_kind_that_never_delays_refuses_a_delay():
    with pytest.raises(ValueError, match="staleness D=2 needs a kind"):
        DelaySchedule("none", D=2)
    with pytest.raises(ValueError, match="per_actor with n_actors=2, D=1 and steps=12 never delays"):
        _config(kind="per_actor", D=1, n_actors=2)


def test_broadcast_every_is_realised_by_the_simulated_loop():
    """s_t = t − k⌊(t − d_t)/k⌋: versions are multiples of k, s_t ∈ [d_t, d_t + k − 1]; the parameter
    ring and the eager rollout queue realise it with the same numbers; k = 1 is the plain schedule."""
    k, plain = 3, DelaySchedule("uniform", D=2)
    schedule = DelaySchedule("uniform", D=2, broadcast_every=k)
    assert schedule.max_delay == 4 and plain.max_delay == 2
    for t in range(40):
        d, s = plain.delay(t, 5), schedule.delay(t, 5)
        assert schedule.version(t, 5) % k == 0 and d <= s <= min(d + k - 1, t)
    assert DelaySchedule(broadcast_every=2).delay(7, 0) == 1 and DelaySchedule(broadcast_every=2).max_delay == 1
    config = _config(kind="uniform", D=2, broadcast_every=k).replace(steps=20, log_points=20)
    frame = train(config)
    queued = train(config.replace(history="rollouts"))
    assert metrics_only(frame.drop(columns=["wall_time"])).equals(metrics_only(queued.drop(columns=["wall_time"])))
    learner = ActorLearner(config)
    for step in range(20):
        rollout = learner.rollout(step)
        assert torch.all(rollout.version == schedule.version(step, config.seed))
        learner.update(step, rollout)
        learner.publish(step + 1)


def test_pacing_keeps_the_budget_under_a_broadcast_period():
    schedule = DelaySchedule("fixed", D=6, admission="pace", budget=4, broadcast_every=3)
    assert schedule.max_delay == 4 and max(schedule.delay(t, 0) for t in range(50)) == 4
    with pytest.raises(ValueError, match="budget=1 with broadcast_every=3: pacing keeps staleness ≤ budget only"):
        DelaySchedule("fixed", D=6, admission="pace", budget=1, broadcast_every=3)
    with pytest.raises(ValueError, match="broadcast_every"):
        DelaySchedule(broadcast_every=0)


def test_a_plugin_kind_named_in_sandbox_plugins_is_found(tmp_path, monkeypatch):
    plugin = tmp_path / "my_delay_plugin.py"
    plugin.write_text(
        "from dataclasses import dataclass\n"
        "from sandbox.frictions.delays import Delay, register_delay\n\n\n"
        "@register_delay('always_one')\n@dataclass(frozen=True)\nclass AlwaysOne(Delay):\n"
        "    def draw(self, step, seed):\n        return min(1, self.D)\n")
    monkeypatch.setenv("SANDBOX_PLUGINS", str(plugin))
    try:
        assert [DelaySchedule.from_dict({"kind": "always_one", "D": 2}).delay(t, 0) for t in range(3)] == [0, 1, 1]
    finally:
        DELAYS._entries.pop("always_one", None)
