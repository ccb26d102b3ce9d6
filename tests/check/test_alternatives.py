"""The verdict in the user's own terms (issue 45, item 3): the losses the config's framework can
select, scored on the same deployment cells, and the suggestion only from those, as the config
change; every cell where the config fails is in the summary."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.check import map_config
from sandbox.check.alternatives import alternatives, change_text
from sandbox.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).parent / "corpus"


def test_alternatives_are_the_frameworks_own_changes_mapped_the_same_way():
    path = CORPUS / "verl_gspo_3b_math_seqmean.yaml"
    mapping = map_config(path)
    found = alternatives(path, mapping)
    assert {"loss_mode=vanilla", "loss_mode=cispo", "loss_mode=sapo", "rollout_is=token"} <= set(found)
    change, recipe = found["loss_mode=cispo"]
    assert change == {"actor_rollout_ref.actor.policy_loss.loss_mode": "cispo"}
    assert recipe.estimator == "cispo" and recipe.estimator_kwargs["eps_high"] == 0.0004  # the config's own clip
    assert all(r.estimator != "gspo" or r.estimator_kwargs != mapping.recipe.estimator_kwargs
               for _, r in found.values())  # the config's own loss is not an option
    assert change_text({"a.b": True, "c": 5.0}) == "a.b=true c=5.0"
    bypass = FIXTURES / "verl_dapo_async.yaml"  # bypass mode replaces loss_mode: only loss_type/rollout_is options
    assert set(alternatives(bypass, map_config(bypass))) == {"loss_type=reinforce", "loss_type=reinforce,rollout_is=token",
                                                             "loss_type=reinforce,rollout_is=sequence"}
    trl = FIXTURES / "trl_cispo.json"
    names = set(alternatives(trl, map_config(trl)))
    assert "loss_type=dr_grpo,importance_sampling_level=token" in names and "loss_type=cispo" not in str(names)


def test_the_verdict_suggests_a_framework_change_and_lists_failing_cells(tiny, tmp_path, capsys):
    out = tmp_path / "check"
    code = main(["check", str(CORPUS / "verl_gspo_3b_math_seqmean.yaml"), "--out", str(out), "--results",
                 str(tmp_path / "r"), "--against", "reinforce", "--deployment-against", "framework", "--workers", "1",
                 "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    card = json.loads((out / "check.json").read_text())
    lines = card["verdict"]
    options = next(line for line in lines if line.startswith("**verl 0.9.1's options on these cells**"))
    assert "none beats the configuration" in options or "To try it: `actor_rollout_ref." in options
    assert any(line.startswith(("**Fails** (", "**Fails on no cell**")) for line in lines)
    assert "(a sandbox method: no verl setting selects it)" in lines[-2] or "sandbox method" in printed
    methods = card["deployment"]["methods"]
    assert methods[0] == "verl_gspo_3b_math_seqmean" and "loss_mode=cispo" in methods and "reinforce" not in methods
