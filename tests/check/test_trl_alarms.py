"""A TRL config's alarms are TRL's (issue 45): its runs log TRL 1.16.0's ``sampling/*`` vLLM-correction
metrics as TRL computes them (tests/estimators/test_trl_metrics.py: by hand), the check shows their
range per cell under TRL's names, and no alarm fires (TRL sets none); without the vLLM correction
the run logs none, and the check says so. By hand and end to end on the tiny battery."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sandbox.analysis.alarms import run_logged
from sandbox.check import map_config
from sandbox.check.alarms import alarm_line, alarm_markdown, trl_cells
from sandbox.cli import main
from sandbox.estimators.trl_metrics import METRICS

FIXTURES = Path(__file__).parent / "fixtures"
MAX = "sampling/importance_sampling_ratio/max"
DIFF = "sampling/sampling_logp_difference/max"


def test_each_run_records_the_range_and_last_value_of_what_it_logged():
    frame = pd.DataFrame({"member": [0, 0, 0, 1, 1, 1], "step": [4, 0, 2, 0, 2, 4],
                          MAX: [1.5, 1.0, 3.0, 1.0, 2.0, math.nan], "error": 0.1})
    table = run_logged(frame)
    assert list(table.columns) == [f"logged {MAX}: min", f"logged {MAX}: max", f"logged {MAX}: last"]
    assert table.to_dict("list") == {f"logged {MAX}: min": [1.0, 1.0], f"logged {MAX}: max": [3.0, 2.0],
                                     f"logged {MAX}: last": [1.5, 2.0]}  # by step, not by row; NaN skipped
    assert run_logged(frame.drop(columns=[MAX])).shape == (2, 0)  # a run that logs none: no column


def _scored():
    rows = []
    for cell, highs in (("a", [3.0, 2.0, 2.5]), ("b", [1.2, 1.1, 1.0])):
        for seed, high in enumerate(highs):
            rows.append({"method": "mine", "cell": cell, "seed": seed, f"logged {MAX}: min": 0.5,
                         f"logged {MAX}: max": high, f"logged {MAX}: last": 1.0, f"logged {DIFF}: min": 0.0,
                         f"logged {DIFF}: max": 0.1 * (seed + 1), f"logged {DIFF}: last": 0.05})
    return pd.DataFrame(rows)


def test_the_cells_show_trls_metrics_and_no_alarm():
    table = trl_cells([_scored()], "mine").set_index("cell")
    assert table.loc["a", f"{MAX}: max"] == 2.5 and table.loc["b", f"{MAX}: max"] == 1.1  # medians over seeds
    logs = list(METRICS)
    assert alarm_line([_scored()], "mine", logs, "trl") == (
        "**Alarms**: none — TRL 1.16.0 sets no alarm on what it logs. Its metrics, as TRL computes them "
        f"(check.md, \"Alarms\"): `{MAX}` reaches 2.5 (`a`); `{DIFF}` reaches 0.2 (`a`) (medians over seeds of each "
        "run's largest).")
    md = alarm_markdown([_scored()], "mine", logs, source="trl")
    assert "None: TRL 1.16.0 sets no alarm" in md and f"| cell | `{DIFF}` | `{MAX}` |" in md  # TRL's order
    assert "| `a` | 0–0.2 (0.05) | 0.5–2.5 (1) |" in md and "rollout_corr" not in md


def test_a_trl_run_without_the_vllm_correction_logs_none():
    base = {"loss_type": "dapo", "num_generations": 8}
    on = map_config({**base, "use_vllm": True})
    assert on.logs == METRICS and on.recipe.estimator_kwargs["trl_metrics"] == "grpo"
    off = map_config({**base, "use_vllm": True, "vllm_importance_sampling_correction": False})
    assert off.logs == () and "trl_metrics" not in off.recipe.estimator_kwargs
    line = alarm_line([_scored()], "mine", off.logs, "trl")
    assert line.startswith("**Alarms**: none shown — this TRL run logs no off-policy metric")
    assert "only with `use_vllm` and `vllm_importance_sampling_correction`" in alarm_markdown([_scored()], "mine",
                                                                                            off.logs, source="trl")
    assert "sampling/" not in "".join(map_config(FIXTURES / "verl_dapo_async.yaml").logs)  # verl logs none of TRL's


def test_check_logs_and_shows_trls_metrics_end_to_end(tiny, tmp_path, capsys):
    out = tmp_path / "check"
    assert main(["check", str(FIXTURES / "trl_cispo.json"), "--out", str(out), "--results", str(tmp_path / "r"),
                 "--against", "reinforce", "--deployment-against", "cached", "--workers", "1", "--quiet"]) == 0
    assert "- **Alarms**: none — TRL 1.16.0 sets no alarm on what it logs" in capsys.readouterr().out
    md = (out / "check.md").read_text()
    section = md.split("## Alarms", 1)[1]
    assert f"`{MAX}`" in section and "| `reversal/stale` |" in section and "rollout_corr" not in section


def test_the_async_trainer_logs_its_ratio_and_kl():
    """AsyncGRPOTrainer logs ratio and kl in every loss call (π_θ against vLLM's μ), whatever its keys."""
    mapping = map_config(Path(__file__).parent / "corpus" / "trl_async_grpo_example.yaml", trainer="async_grpo")
    assert mapping.logs == ("ratio", "kl") and mapping.recipe.estimator_kwargs["trl_metrics"] == "async_grpo"
    frame = pd.DataFrame([{"method": "mine", "cell": "a", "seed": s, "logged ratio: min": 1.0,
                           "logged ratio: max": 1.5 + s, "logged ratio: last": 1.1, "logged kl: min": 0.0,
                           "logged kl: max": 0.01, "logged kl: last": 0.005} for s in range(3)])
    assert alarm_line([frame], "mine", mapping.logs, "trl").endswith(
        "`ratio` reaches 2.5 (`a`); `kl` reaches 0.01 (`a`) (medians over seeds of each run's largest).")
    assert "AsyncGRPOTrainer logs these in its loss" in alarm_markdown([frame], "mine", mapping.logs, source="trl")
