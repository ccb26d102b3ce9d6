"""``sandbox check`` reports, per cell, which of verl's alarms fired and how many steps before a
collapse (sandbox.check.alarms), by hand and end to end on the tiny battery of conftest.py."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sandbox.check.alarms import alarm_line, alarm_markdown, cell_alarms
from sandbox.cli import main

NAN = math.nan


def scored(rows):
    """A scored frame: (cell, collapse step, ESS alarm first, ESS alarm lead) per seed."""
    frame = pd.DataFrame([{"method": "mine", "cell": c, "seed": k, "collapse_step": s, "alarm ESS < 0.3: first": f,
                           "alarm ESS < 0.3: lead": lead} for k, (c, s, f, lead) in enumerate(rows)])
    for name in ("mean IS weight outside [0.5, 2]", "|KL| > 0.1"):
        frame[f"alarm {name}: first"], frame[f"alarm {name}: lead"] = NAN, NAN
    return frame


def test_per_cell_the_seeds_an_alarm_fired_in_and_the_collapses_it_preceded():
    frame = scored([("a", 60, 40, 20), ("a", NAN, 10, NAN), ("a", 80, NAN, NAN), ("b", NAN, NAN, NAN)])
    table = cell_alarms(frame, "mine").set_index("cell")
    assert table.loc["a", ["seeds", "collapses", "ESS < 0.3: fired", "ESS < 0.3: warned"]].tolist() == [3, 2, 2, 1]
    assert table.loc["a", "ESS < 0.3: before"] == 20 and table.loc["b", "ESS < 0.3: fired"] == 0
    md = alarm_markdown([frame], "mine")
    assert "verl `rollout_corr/rollout_is_eff_sample_size`" in md and "TRL `sampling/importance_sampling_ratio/mean`" in md
    assert "| `a` | 2/3 | 2/3 seeds (first at step 25); before 1/2 collapses by 20 steps | — | — |" in md
    assert alarm_line([frame], "mine") == ("**Alarms** (2 collapses in 4 runs): ESS < 0.3 "
                                           "(`rollout_corr/rollout_is_eff_sample_size`) fired in 1 of 2 cells, before "
                                           "1 of 2 collapses (check.md, \"Alarms\").")


def test_results_without_alarm_columns_say_so():
    old = pd.DataFrame({"method": ["mine"], "cell": ["a"], "seed": [0], "value": [0.1]})
    assert alarm_line([old], "mine") == "**Alarms**: not recorded in these results."
    assert "predate them" in alarm_markdown([old], "mine")


def test_check_prints_the_alarm_line_and_writes_the_alarm_table(tiny, tmp_path, capsys):
    out = tmp_path / "check"
    fixture = Path(__file__).parent / "fixtures" / "verl_rollout_rs.yaml"
    assert main(["check", str(fixture), "--out", str(out), "--results", str(tmp_path / "r"), "--against", "reinforce",
                 "--workers", "1", "--quiet"]) == 0
    assert "- **Alarms** (" in capsys.readouterr().out
    md = (out / "check.md").read_text()
    assert "## Alarms" in md and "| `reversal/stale` |" in md


def test_only_the_alarms_whose_metric_the_run_logs_are_shown():
    """verl logs rollout_corr/* only with calculate_log_probs (ray_trainer.py); TRL its IS ratio only
    with the vLLM correction; AsyncGRPOTrainer none of them (issue 45, item 3)."""
    from sandbox.check import map_config
    from sandbox.check.alarms import logged

    on = map_config({"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 4})
    assert [a.name for a in logged(on.logs)] == ["ESS < 0.3", "mean IS weight outside [0.5, 2]", "|KL| > 0.1"]
    off = map_config({"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 4,
                      "actor_rollout_ref.rollout.calculate_log_probs": False})
    assert logged(off.logs) == [] and off.to_dict()["logs"] == []
    trl = map_config({"loss_type": "dapo", "num_generations": 8, "use_vllm": True})
    assert [a.name for a in logged(trl.logs)] == ["mean IS weight outside [0.5, 2]"]
    assert logged(map_config({"loss_type": "dapo", "num_generations": 8}).logs) == []
    frame = scored([("a", 60, 40, 20), ("a", NAN, 10, NAN)])
    assert alarm_line([frame], "mine", off.logs).startswith("**Alarms**: none shown")
    assert "none is shown" in alarm_markdown([frame], "mine", off.logs)
    md = alarm_markdown([frame], "mine", trl.logs)
    assert "ESS" not in md and "mean IS weight" in md
    assert "2/2 seeds (first at trainer step 12); before 1/1 collapses by 10 trainer steps" in \
        alarm_markdown([frame], "mine", on.logs, per_step=2)  # steps 40 and 10 (median 25), lead 20, K = 2
