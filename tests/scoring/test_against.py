"""``sandbox score --against`` names any registered estimator (the 2026 ones included), and the
inference-engine cells run end to end: a tiny battery defined here, scored on the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sandbox.cli import main
from sandbox.frictions import DelaySchedule
from sandbox.scoring.battery import build
from sandbox.scoring.recipes import RECIPES, recipe_names

STEPS, DROP = 6, {"kind": "uniform", "D": 2, "admission": "drop", "budget": 0}
TINY_ENGINE = {
    "name": "tiny-engine", "version": 1, "seed": 0, "description": "a test battery: the inference engine's frictions",
    "envs": {
        "reversal": {"kind": "train", "seeds": 2, "metric": "error", "random": 0.5, "best": 0.0,
                     "run": {"task": "reverse_copy", "lr": 1e-3, "steps": STEPS, "log_points": 1,
                             "task_kwargs": {"H": 2, "V": 2, "match": "per_position", "eval_mode": "exact",
                                             "width": 8, "heads": 1, "layers": 1, "mlp": 8,
                                             "prompts_per_step": 2, "samples_per_prompt": 2}}},
    },
    "cells": [
        {"name": "reversal/top-p-full", "env": "reversal", "friction": "inference engine",
         "run": {"staleness": {"kind": "fixed", "D": 1},
                 "frictions": [["truncated_sampling", {"top_p": 0.9, "report": "full"}]]}},
        {"name": "reversal/partial", "env": "reversal", "friction": "inference engine",
         "run": {"staleness": {"kind": "uniform", "D": 2}, "frictions": [["partial_rollouts", {"chunks": 2}]]}},
        {"name": "reversal/drop", "env": "reversal", "friction": "inference engine", "run": {"staleness": DROP}},
    ],
}


def test_recipe_names_hold_the_recipes_and_every_estimator():
    from sandbox.estimators import ESTIMATORS

    names = recipe_names()
    assert names[: len(RECIPES)] == list(RECIPES) and len(names) == len(set(names))
    assert set(ESTIMATORS.names()) <= set(names)
    zoo = {"dppo", "vespo", "luspo", "gmpo", "gspo_token", "two_sided_ppo", "topr", "tpo", "sat", "rollout_rs"}
    assert zoo <= set(names)


def test_score_against_2026_estimators_on_the_engine_cells(tmp_path, capsys, monkeypatch):
    import sandbox.scoring.api as api

    monkeypatch.setattr(api, "as_battery", lambda name: build(TINY_ENGINE))
    out = tmp_path / "card"
    code = main(["score", "reinforce", "--against", "dppo,vespo", "--workers", "1", "--quiet",
                 "--results", str(tmp_path / "r"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "9 jobs: 0 reused, 9 computed" in printed
    card = json.loads((out / "scorecard.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert card["methods"] == ["reinforce", "dppo", "vespo"]
    assert "inference engine" in card["aggregate"]["dppo"]["frictions"]
    assert all(0 <= s["score"] <= 1 for s in card["scores"])
    # the drop cell reports the fraction of prompts never admitted: every step's batch is dropped
    # whole when its delay d_t exceeds the budget (delays do not depend on the prompt or the method)
    expected = np.mean([DelaySchedule(**DROP).delay(t, 0) > DROP["budget"] for t in range(STEPS)])
    assert 0 < expected < 1
    drop_rows = [r for r in card["cells"] if r["cell"] == "reversal/drop"]
    assert len(drop_rows) == 3 and all(r["dropped"] == pytest.approx(expected) for r in drop_rows)
    assert not any("dropped" in r for r in card["cells"] if r["cell"] != "reversal/drop")
    assert {s["dropped"] is None for s in card["scores"] if s["cell"] != "reversal/drop"} == {True}
    md = (out / "scorecard.md").read_text()
    assert f"| reversal/drop | {expected:.2f} | {expected:.2f} | {expected:.2f} |" in md


def test_an_unknown_against_is_one_line_listing_the_choices(capsys):
    assert main(["score", "dg", "--against", "dppo,nope", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown: ['nope']" in err
    assert all(name in err for name in recipe_names())
