"""``sandbox check`` reports, per cell, which of verl's example alarms flagged the configuration or
fired later and how many steps before a collapse (sandbox.check.alarms), by hand and end to end on
the tiny battery of conftest.py."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sandbox.analysis.alarms import VERL_ALARMS, run_alarms
from sandbox.check.alarms import alarm_line, alarm_markdown, cell_alarms, logged
from sandbox.cli import main

NAN = math.nan
ESS = "rollout_is_eff_sample_size < 0.3"


def scored(rows):
    """A scored frame: (cell, collapse step, ESS alarm first, lead, flag) per seed."""
    frame = pd.DataFrame([{"method": "mine", "cell": c, "seed": k, "collapse_step": s, f"alarm {ESS}: first": f,
                           f"alarm {ESS}: lead": lead, f"alarm {ESS}: flag": flag}
                          for k, (c, s, f, lead, flag) in enumerate(rows)])
    for a in VERL_ALARMS:
        if a.name != ESS:
            frame[f"alarm {a.name}: first"], frame[f"alarm {a.name}: lead"] = NAN, NAN
            frame[f"alarm {a.name}: flag"] = NAN
    return frame


ROWS = [("a", 60, 40, 20, 0.0), ("a", NAN, 10, NAN, 0.0), ("a", 80, 1, 79, 1.0), ("b", NAN, NAN, NAN, NAN)]


def test_per_cell_flags_later_firings_and_the_collapses_they_preceded():
    """Seed 2's alarm was on at step 1 (within the first D updates): a configuration flag, not a
    warning of its collapse at 80; seed 0's fired at 40, 20 steps before its collapse."""
    frame = scored(ROWS)
    table = cell_alarms(frame, "mine").set_index("cell")
    assert table.loc["a", ["seeds", "collapses", f"{ESS}: flagged", f"{ESS}: fired", f"{ESS}: warned"]].tolist() == \
        [3, 2, 1, 2, 1]
    assert table.loc["a", f"{ESS}: first"] == 25 and table.loc["a", f"{ESS}: before"] == 20
    assert table.loc["b", f"{ESS}: fired"] == 0 and table.loc["b", f"{ESS}: flagged"] == 0
    md = alarm_markdown([frame], "mine")
    assert f"{ESS} (`rollout_corr/rollout_is_eff_sample_size`)" in md
    assert ("| `a` | 2/3 | — | configuration flag: on from the start in 1/3 seeds; fired later in 2/3 seeds (first at "
            "step 25); before 1/2 collapses by 20 steps |") in md
    assert alarm_line([frame], "mine") == (
        f"**Alarms** (2 collapses in 4 runs): {ESS} flags the configuration (on from the start) in 1 of 2 cells; "
        f"{ESS} fired later in 1 of 2 cells, before 1 of 2 collapses (check.md, \"Alarms\").")
    assert "first at trainer step 12); before 1/2 collapses by 10 trainer steps" in \
        alarm_markdown([frame], "mine", per_step=2)  # steps 40 and 10 (median 25), lead 20, K = 2


def test_results_without_alarm_columns_say_so():
    old = pd.DataFrame({"method": ["mine"], "cell": ["a"], "seed": [0], "value": [0.1]})
    assert alarm_line([old], "mine") == "**Alarms**: not recorded in these results."
    assert "predate them" in alarm_markdown([old], "mine")
    earlier = scored(ROWS).drop(columns=[c for c in scored(ROWS).columns if c.startswith("alarm ")])
    earlier["alarm ESS < 0.3: first"] = 1.0  # the first round's alarm columns: not verl's metrics
    assert alarm_line([earlier], "mine").startswith("**Alarms**: not recorded in these results")


def test_run_alarms_reads_verls_columns_and_flags_an_alarm_on_from_the_first_d_updates():
    """Two members of a cell with D = 4: member 0's |kl| is on from step 2 (≤ D: a flag), member 1's
    from step 8; member 1 collapses at 16 (error jumps to the random level 0.5)."""
    steps = [0, 2, 4, 8, 16, 32]
    kl = {0: [NAN, 0.2, 0.3, 0.3, 0.3, 0.3], 1: [NAN, 0.0, 0.01, 0.5, 0.5, 0.5]}
    error = {0: [0.5, 0.4, 0.2, 0.1, 0.05, 0.05], 1: [0.5, 0.4, 0.2, 0.1, 0.5, 0.5]}
    frame = pd.DataFrame([{"member": m, "step": s, "error": error[m][i], "rollout_corr/kl": kl[m][i]}
                          for m in (0, 1) for i, s in enumerate(steps)])
    cell = {"metric": "error", "best": 0.0, "random": 0.5, "run": {"staleness": {"kind": "fixed", "D": 4}}}
    table = run_alarms(frame, cell, 32)
    assert [c for c in table.columns if "kl" in c] == ["alarm |kl| > 0.1: first", "alarm |kl| > 0.1: lead",
                                                       "alarm |kl| > 0.1: flag"]  # only what the run logs
    assert table["alarm |kl| > 0.1: first"].tolist() == [2, 8]
    assert table["alarm |kl| > 0.1: flag"].tolist() == [1, 0]
    assert math.isnan(table["collapse_step"][0]) and table["collapse_step"][1] == 16
    assert table["alarm |kl| > 0.1: lead"][1] == 8


def test_check_prints_the_alarm_line_and_writes_the_alarm_table(tiny, tmp_path, capsys):
    out = tmp_path / "check"
    fixture = Path(__file__).parent / "fixtures" / "verl_rollout_rs.yaml"
    assert main(["check", str(fixture), "--out", str(out), "--results", str(tmp_path / "r"), "--against", "reinforce",
                 "--workers", "1", "--quiet"]) == 0
    assert "- **Alarms** (" in capsys.readouterr().out
    md = (out / "check.md").read_text()
    assert "## Alarms" in md and "| `reversal/stale` |" in md and "|kl| > 0.1 (`rollout_corr/kl`)" in md
    assert "`rollout_corr/rollout_is_veto_fraction`: no verl 0.9.1 run logs it" in md


def test_only_the_alarms_whose_metric_the_run_logs_are_shown():
    """verl 0.9.1 logs rollout_corr/* only with calculate_log_probs (ray_trainer.py), the IS-weight
    metrics only at a rollout_is level, no veto fraction; TRL none of verl's (issue 45, item 3)."""
    from sandbox.check import map_config

    base = {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 4}
    on = map_config(base)
    assert [a.name for a in logged(on.logs)] == ["|kl| > 0.1", "chi2_token > 1"]
    assert on.recipe.estimator_kwargs["verl_metrics"] == (None, 2.0, None)
    seq = map_config({**base, "algorithm.rollout_correction.rollout_is": "sequence",
                      "algorithm.rollout_correction.rollout_is_threshold": "0.5_5.0"})
    assert [a.name for a in logged(seq.logs)] == ["rollout_is_mean ∉ [0.5, 2]", ESS, "rollout_is_std > 1",
                                                  "|kl| > 0.1", "chi2_token > 1"]
    assert seq.recipe.estimator_kwargs["verl_metrics"] == ("sequence", 5.0, 0.5)
    off = map_config({**base, "actor_rollout_ref.rollout.calculate_log_probs": False})
    assert logged(off.logs) == [] and off.to_dict()["logs"] == [] and "verl_metrics" not in off.recipe.estimator_kwargs
    trl = map_config({"loss_type": "dapo", "num_generations": 8, "use_vllm": True})
    assert logged(trl.logs) == []
    frame = scored(ROWS[:2])
    assert alarm_line([frame], "mine", off.logs).startswith("**Alarms**: none shown")
    assert "only with the engine's log-probs" in alarm_markdown([frame], "mine", off.logs)
    md = alarm_markdown([frame], "mine", on.logs)
    assert "ESS" not in md.split("Not shown")[0] and "|kl| > 0.1" in md
    assert "logged only with a `rollout_is` level" in md
