"""The committed built-ins (sandbox/scoring/builtin_data.py) on the tiny battery of conftest.py: exported
from one results folder, a check in a fresh folder restores them and computes only the
configuration's jobs (the built-ins on the deployment cells when asked, or once cached); --dry-run
costs every job from measured costs (never "unknown") and writes nothing."""

from __future__ import annotations

from pathlib import Path

import sandbox.scoring.builtin_data as builtin_data
from sandbox.check import check
from sandbox.check.api import dry_run
from sandbox.scoring.battery import build
from sandbox.scoring.recipes import DEFAULT_AGAINST, make_recipe
from sandbox.scoring.runner import default_store, run_battery

from .conftest import TINY

CONFIG = {"loss_type": "dapo", "num_generations": 4, "top_p": 0.9}


def test_a_first_check_computes_only_its_own_jobs(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(builtin_data, "HERE", tmp_path)
    battery = build(TINY)
    filled = default_store(tmp_path / "filled")
    run_battery(battery, [(make_recipe(m), ()) for m in DEFAULT_AGAINST], filled, workers=1, progress=False)
    path = builtin_data.export(battery, filled)
    assert path == tmp_path / "builtins-tiny-check.parquet" and len(builtin_data.committed_ids(battery)) == 14

    fresh = tmp_path / "fresh"
    lines = dry_run(CONFIG, results=fresh, workers=1)
    assert "14 finished" in lines[0] and not any("unknown" in line for line in lines)
    assert not fresh.exists()  # a dry run writes nothing

    report = check(CONFIG, results=fresh, workers=1, progress=False, deployment_against="cached")
    standard, deploy = report.standard.attrs["jobs"], report.deployment.attrs["jobs"]
    assert (standard["reused"], standard["computed"]) == (14, 2)  # the built-ins restored, the config's 2 run
    cells = len(set(report.deployment["cell"]))
    assert (deploy["reused"], deploy["computed"]) == (0, cells)  # the config's jobs only
    assert set(report.deployment["method"]) == {report.mapping.label}
    assert "nothing else ran on these cells" in report.verdict[1]

    best = check(CONFIG, results=fresh, workers=1, progress=False, deployment_against="best")
    assert best.deployment.attrs["jobs"]["computed"] == cells  # the best built-in's, the config's reused
    assert set(best.deployment["method"]) == {report.mapping.label, _best(report)}
    assert "(a sandbox method: no trl setting selects it)" in best.verdict[1]
    again = check(CONFIG, results=fresh, workers=1, progress=False, deployment_against="cached")  # now finds it
    assert set(again.deployment["method"]) == {report.mapping.label, _best(report)}
    assert again.deployment.attrs["jobs"]["computed"] == 0


def test_the_default_check_scores_the_frameworks_options_and_its_cost_line_counts_them(tiny, tmp_path, monkeypatch):
    """By default the deployment cells hold the config beside the losses its framework can select
    (each the config with one change); the dry run costs them before, and a second check reuses all."""
    from sandbox.check import map_config
    from sandbox.check.alternatives import alternatives

    monkeypatch.setattr(builtin_data, "HERE", tmp_path)
    options = alternatives(CONFIG, map_config(CONFIG))
    assert len(options) >= 3
    fresh = tmp_path / "fresh"
    lines = dry_run(CONFIG, results=fresh, workers=1)  # no committed costs here: counted, not timed
    assert f"deployment battery: {len(options)} framework option(s)" in lines[1]
    first = check(CONFIG, results=fresh, workers=1, progress=False)
    deploy = first.deployment.attrs["jobs"]
    n_cells = len(set(first.deployment["cell"]))
    assert deploy["computed"] == n_cells * (1 + len(options))
    assert f"{n_cells * (1 + len(options))} to run" in lines[1]  # the cost line counted every job it ran
    assert set(first.deployment["method"]) == {first.mapping.label, *options}
    assert first.verdict[2].startswith("**TRL 1.16.0 (GRPOConfig, GRPOTrainer)'s options on these cells**")
    warm = check(CONFIG, results=fresh, workers=1, progress=False)
    assert warm.deployment.attrs["jobs"]["computed"] == 0 and warm.standard.attrs["jobs"]["computed"] == 0
    assert "0 to run" in dry_run(CONFIG, results=fresh, workers=1)[1]


def _best(report) -> str:
    aggregate = report.standard.attrs["scorecard"]["aggregate"]
    return max(DEFAULT_AGAINST, key=lambda m: aggregate[m]["iqm"]["estimate"])


def test_no_committed_file_means_nothing_restored(tmp_path, monkeypatch):
    monkeypatch.setattr(builtin_data, "HERE", tmp_path)
    battery = build(TINY)
    assert builtin_data.restore(battery, [make_recipe("reinforce")], default_store(tmp_path / "r")) == []
    assert builtin_data.fallback_costs(battery, battery, [make_recipe("reinforce")]) == {}
    assert Path(tmp_path / "r" / "scores").is_dir()
