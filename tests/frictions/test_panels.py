"""The one panel → friction table (sandbox.frictions.panels): what each panel's strength sets, as
the figures and the batteries spelled it by hand before, and that every setting it makes is a
valid RunConfig."""

from __future__ import annotations

import pytest

from sandbox.frictions.panels import PANELS, panel_settings
from sandbox.runtime.config import RunConfig


def test_each_panel_sets_its_knob_and_is_nothing_at_its_identity():
    assert panel_settings([("staleness", 16)]) == {"staleness": {"kind": "fixed", "D": 16}}
    assert panel_settings([("actor bug", 0.1)]) == {"frictions": (("landmine", {"p_bug": 0.1}),)}
    assert panel_settings([("reward corruption", 0.3)]) == {"frictions": (("bernoulli_reward", {"p": 0.3}),)}
    assert panel_settings([("rare discovery", 0.03)]) == {"frictions": (("rare_discovery", {"p_disc": 0.03}),)}
    assert panel_settings([("top-p (full report)", 0.1)]) == {
        "frictions": (("truncated_sampling", {"report": "full", "top_p": 0.9}),)}
    delay = {"staleness": {"kind": "uniform", "D": 8}}
    assert panel_settings([("drop admission", 6)], delay) == {
        "staleness": {"kind": "uniform", "D": 8, "admission": "drop", "budget": 2}}
    assert panel_settings([("partial rollouts", 3)], delay) == {**delay, "frictions": (("partial_rollouts",
                                                                                       {"chunks": 3}),)}
    for name, panel in PANELS.items():
        assert panel.settings(panel.identity, delay) == delay, name


def test_panels_compose_in_order_and_make_valid_configs():
    four = panel_settings([("staleness", 4), ("actor bug", 0.1), ("reward corruption", 0.1), ("rare discovery", 0.02)])
    assert four == {"staleness": {"kind": "fixed", "D": 4},
                    "frictions": (("landmine", {"p_bug": 0.1}), ("bernoulli_reward", {"p": 0.1}),
                                  ("rare_discovery", {"p_disc": 0.02}))}
    RunConfig(task="reverse_copy", task_kwargs={"H": 2}, **four)
    with pytest.raises(ValueError, match="panel must be one of"):
        panel_settings([("stale", 4)])
