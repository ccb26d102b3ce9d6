"""Battery definitions: versioned data whose hash is recorded, cells validated, normalisation right."""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from sandbox.scoring.batteries import quick
from sandbox.scoring.battery import (
    FRICTIONS,
    battery_names,
    build,
    definition_hash,
    load_battery,
    recorded_hash,
)

REQUIRED_CELLS = {  # the minimum: (env, friction) pairs every packaged battery must hold
    ("bandit", "actor bug"), ("bandit", "rare discovery"), ("bandit", "staleness"),
    ("mnist", "staleness"), ("mnist", "reward corruption"), ("mnist", "actor bug"),
    ("reversal", "staleness"), ("reversal", "actor bug"), ("reversal", "reward corruption"),
    ("reversal", "rare discovery"), ("reversal", "all four"), ("reversal", "inference engine"),
}


def _engine_frictions(cell) -> set[str]:
    """The inference-engine frictions a cell applies: truncated sampling by its report, partial
    rollouts, and a staleness budget by its admission policy."""
    found = {f"{name}:{kwargs.get('report', 'truncated')}" if name == "truncated_sampling" else name
             for name, kwargs in cell.run.get("frictions", ()) if name in ("truncated_sampling", "partial_rollouts")}
    if cell.run.get("staleness", {}).get("budget") is not None:
        found.add(f"admission:{cell.run['staleness'].get('admission', 'pace')}")
    return found


@pytest.mark.parametrize("name", ["quick", "standard", "paper"])
def test_definition_matches_its_recorded_version(name):
    battery = load_battery(name)
    recorded = recorded_hash(name, battery.version)
    assert recorded is not None, f"battery {name!r} v{battery.version} has no hash in batteries/versions.py"
    assert battery.hash == recorded, (
        f"battery {name!r} changed without a version bump: bump its version to {battery.version + 1} and record "
        f"{battery.hash!r} in sandbox/scoring/batteries/versions.py")


def test_a_changed_definition_has_another_hash_but_the_version_does_not():
    data = copy.deepcopy(quick.BATTERY)
    data["envs"]["mnist"]["run"]["steps"] += 1
    changed = build(data)
    assert changed.version == load_battery("quick").version
    assert changed.hash != recorded_hash("quick", changed.version)  # the test above would fail on it
    data["version"] += 1  # the version does not enter the hash: the bump is recorded, not hashed
    assert build(data).hash == changed.hash == definition_hash(changed.definition)


def test_packaged_batteries_hold_the_required_cells():
    assert {"quick", "standard", "paper"} <= set(battery_names())
    for name in ("quick", "standard", "paper"):
        battery = load_battery(name)
        assert REQUIRED_CELLS <= {(c.env, c.friction) for c in battery.cells}, name
        assert all(c.friction in FRICTIONS for c in battery.cells)
    engine = {name: set().union(*(_engine_frictions(c) for c in load_battery(name).cells))
              for name in ("quick", "standard", "paper")}
    assert engine["quick"] == {"truncated_sampling:full", "partial_rollouts", "admission:drop"}
    assert engine["standard"] == engine["paper"] == engine["quick"] | {"truncated_sampling:truncated", "admission:mask"}
    for cell in load_battery("paper").cells:
        if "partial_rollouts" in _engine_frictions(cell):  # the simulated loop's parameter history
            assert cell.run["history"] == "params" and cell.run["staleness"]["D"] > 0, cell.name
        if _engine_frictions(cell):
            assert cell.friction == "inference engine", cell.name
    standard = load_battery("standard")
    llm = [c for c in standard.cells if c.run.get("task") == "hf_text"]
    assert llm and llm[0].run["staleness"]["D"] > 0 and llm[0].async_config == {"n_workers": 1} and not llm[0].batched
    assert all(c.run.get("task") != "hf_text" for c in load_battery("quick").cells)


def test_extends_merges_envs_and_appends_cells():
    quick_b, standard = load_battery("quick"), load_battery("standard")
    assert [c.name for c in standard.cells[: len(quick_b.cells)]] == [c.name for c in quick_b.cells]
    by_name = {c.name: c for c in standard.cells}
    assert by_name["mnist/stale-D128"].run["steps"] == 1500
    assert by_name["mnist/stale-D128"].run["staleness"] == {"D": 128, "kind": "fixed"}  # kept from quick
    assert by_name["mnist/stale-D128"].run["task_kwargs"]["batch_size"] == 100
    assert load_battery("standard").with_seeds(2).cells[0].seeds == 2


@functools.cache
def _uniform_reversal_error(H: int, match: str, V: int = 2) -> float:
    """Error of a uniform policy by enumerating every prompt and answer under the reward ``match``;
    beyond H = 4 the closed forms (to-first-error 1 − Σ_k V^−k / H, per-position 1 − 1/V), checked
    against the enumeration up to H = 4."""

    def closed(h: int) -> float:
        return 1 - sum(V ** -k for k in range(1, h + 1)) / h if match == "to_first_error" else 1 - 1 / V

    if H > 4:
        assert all(_uniform_reversal_error(h, match, V) == pytest.approx(closed(h), abs=1e-6) for h in (1, 2, 3, 4))
        return closed(H)
    from sandbox.envs.sequences import all_sequences, reversal_reward, reversal_targets

    prompts, answers = all_sequences(H, V), all_sequences(H, V)
    rows = prompts.repeat_interleave(answers.shape[0], 0)
    targets = reversal_targets(rows, V, "reverse", 0)
    rewards = reversal_reward(answers.repeat(prompts.shape[0], 1), targets, match)
    return 1 - float(rewards.to(torch.float64).mean())


def test_uniform_error_under_each_reward():  # sanity: the enumeration against hand values
    assert _uniform_reversal_error(3, "per_position") == pytest.approx(0.5, abs=1e-6)
    assert _uniform_reversal_error(1, "to_first_error") == pytest.approx(0.5, abs=1e-6)
    assert _uniform_reversal_error(2, "to_first_error") == pytest.approx(1 - (1 / 2 + 1 / 4) / 2, abs=1e-6)


@pytest.mark.parametrize("name", ["quick", "standard", "paper"])
def test_random_policy_values_are_exact(name):
    for cell in load_battery(name).cells:
        if cell.env == "reversal":
            kwargs = cell.run["task_kwargs"]
            assert "match" in kwargs, f"{cell.name}: pin the reward (match), its uniform error depends on it"
            assert cell.random == pytest.approx(_uniform_reversal_error(kwargs["H"], kwargs["match"]), abs=1e-6)
        if cell.env == "mnist":
            assert cell.random == pytest.approx(0.9)  # ten classes, one right


def test_normalise_clips_and_scores_nan_zero():
    cell = load_battery("quick").cells[3]  # an MNIST cell: random 0.9, best 0
    assert cell.normalise(0.9) == 0 and cell.normalise(0.0) == 1
    assert cell.normalise(0.45) == pytest.approx(0.5)
    assert cell.normalise(0.95) == 0 and cell.normalise(float("nan")) == 0


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["cells"].append(dict(d["cells"][0])), "appears twice"),
    (lambda d: d["cells"][0].update(env="atari"), "env must be one of"),
    (lambda d: d["cells"][0].update(friction="gremlins"), "friction must be one of"),
    (lambda d: d["cells"][0].update(budget=3), "takes only"),
    (lambda d: d["envs"]["mnist"].update(seeds=0), "seeds must be an integer"),
    (lambda d: d.pop("version"), "needs 'version'"),
])
def test_bad_definitions_are_one_line_errors(mutate, message):
    data = copy.deepcopy(quick.BATTERY)
    mutate(data)
    with pytest.raises(ValueError, match=message):
        build(data)


def test_unknown_battery_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown battery 'nope'; known: \['paper', 'quick', 'standard'\]"):
        load_battery("nope")
