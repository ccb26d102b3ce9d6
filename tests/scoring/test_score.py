"""``sandbox score`` end to end on a tiny battery defined here: the three report files, cached
baselines (a second run computes only the new estimator), resumability and every bad input."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

import sandbox
from sandbox.cli import main
from sandbox.scoring import score
from sandbox.scoring.battery import build
from sandbox.scoring.runner import default_store

TINY = {
    "name": "tiny", "version": 1, "seed": 0, "description": "a test battery: one probe, one tiny reversal",
    "envs": {
        "bandit": {"kind": "probe", "seeds": 3, "metric": "signal_fraction", "random": 0.0, "best": 1.0,
                   "probe": {"K": 5, "B": 10}},
        "reversal": {"kind": "train", "seeds": 2, "metric": "error", "random": 0.5, "best": 0.0,
                     "run": {"task": "reverse_copy", "lr": 1e-3, "steps": 3, "log_points": 1,
                             "task_kwargs": {"H": 1, "V": 2, "eval_mode": "exact", "width": 8, "heads": 1,
                                             "layers": 1, "mlp": 8, "prompts_per_step": 2, "samples_per_prompt": 2}}},
    },
    "cells": [
        {"name": "bandit/rare-failures", "env": "bandit", "friction": "actor bug",
         "probe": {"p_correct": 0.9, "actor": "point_mass", "rho": 0.2}},
        {"name": "reversal/stale", "env": "reversal", "friction": "staleness",
         "run": {"staleness": {"kind": "fixed", "D": 1}}},
    ],
}
AGAINST = "reinforce,gac"
#: the README's plugin estimator (``clipped_adv_pg``), one file in the repository
EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "my_estimators.py")
PLUGIN = '''
from dataclasses import dataclass

from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("score_test_nan")
@dataclass(frozen=True)
class NaNLoss(Estimator):
    """Returns NaN."""

    def token_loss(self, t: PGTerms):
        return t.logp * float("nan")
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """A plugin whose estimator returns NaN."""
    path = tmp_path_factory.mktemp("plugin") / "score_test_plugin.py"
    path.write_text(PLUGIN)
    return str(path)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A results folder with the tiny battery's baselines in it."""
    results = tmp_path_factory.mktemp("filled")
    run("reinforce", results)
    return results


def run(name, results, **kwargs):
    return score(name, battery=TINY, against=AGAINST, results=results, workers=1, progress=False, **kwargs)


def test_score_writes_the_report_and_reuses_the_baselines(tmp_path):
    results, out = tmp_path / "results", tmp_path / "card"
    first = run("clipped_adv_pg", results, plugin=EXAMPLE, settings={"c": 0.5}, out=out)
    assert first.attrs["jobs"] == {"total": 6, "reused": 0, "computed": 6}
    assert {p.name for p in out.iterdir()} == {"scorecard.png", "scorecard.md", "scorecard.json"}
    assert (out / "scorecard.png").stat().st_size > 10_000
    md = (out / "scorecard.md").read_text()
    assert "`tiny` v1" in md and "commit `" in md and "| **clipped_adv_pg[c=0.5]** |" in md
    card = json.loads((out / "scorecard.json").read_text())
    assert card["methods"] == ["clipped_adv_pg[c=0.5]", "reinforce", "gac"]
    assert len(card["scores"]) == 3 * (3 + 2) and card["battery"] == "tiny" and card["version"] == 1
    assert set(first.columns) >= {"method", "cell", "seed", "value", "score", "diverged"}
    assert first["score"].between(0, 1).all()

    second = run("dg", results, settings={"eta": 0.5})  # another new estimator: only its own cells run
    assert second.attrs["jobs"] == {"total": 6, "reused": 4, "computed": 2}
    again = run("clipped_adv_pg", results, plugin=EXAMPLE, settings={"c": 0.5})  # resumed: nothing recomputed
    assert again.attrs["jobs"]["computed"] == 0
    cols = ["method", "cell", "seed", "score"]
    assert again[cols].sort_values(cols).reset_index(drop=True).equals(first[cols].sort_values(cols).reset_index(drop=True))
    assert sandbox.score is score  # the lazy export


def test_a_nan_estimator_scores_zero_and_is_counted(plugin, tmp_path):
    frame = run("score_test_nan", tmp_path, plugin=plugin)
    mine = frame[frame["method"] == "score_test_nan"]
    assert mine["diverged"].all() and (mine["score"] == 0).all()
    summary = frame.attrs["scorecard"]["aggregate"]["score_test_nan"]
    assert summary["diverged"] == summary["runs"] == 5
    assert not frame[frame["method"] != "score_test_nan"]["diverged"].any()


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "no_such_estimator"}, "unknown estimator 'no_such_estimator'"),
    ({"name": "dg", "battery": "no_such_battery"}, "unknown battery 'no_such_battery'"),
    ({"name": "dg", "settings": {"zeta": 1}}, r"unknown hyperparameter\(s\) \['zeta'\] for estimator 'dg'"),
    ({"name": "dg", "settings": {"eta": -1}}, "method 'dg': eta must lie in"),
    ({"name": "dg", "against": "reinforce,nope"}, r"against must name recipes or estimators; unknown: \['nope'\]; "
                                                   r"valid: reinforce, .*, dg, .*dppo.*vespo"),
    ({"name": "dg", "against": 3}, "against must be a comma-separated string or a list of names"),
    ({"name": "dg", "plugin": "missing_file.py"}, "plugin file 'missing_file.py' does not exist"),
    ({"name": "dg", "seeds": 0}, "seeds must be an integer"),
    ({"name": "dg", "settings": ["eta=1"]}, "settings must be a dict"),
])
def test_bad_input_is_a_one_line_error_and_keeps_the_cache(filled, kwargs, message):
    store = default_store(filled)
    cached = set(store.job_ids())
    assert cached
    args = {"battery": TINY, "against": AGAINST, "results": filled, "workers": 1, "progress": False, **kwargs}
    with pytest.raises(ValueError, match=message) as info:
        score(**args)
    assert "\n" not in str(info.value)
    assert set(store.job_ids()) == cached


@pytest.mark.parametrize("source, message", [
    ("import no_such_module_anywhere\n", r"failed to (import|load): .*ModuleNotFoundError.*No module named"),
    ("x = (\n", r"SyntaxError"),
    ("raise RuntimeError('boom')\n", r"failed to (import|load): .*RuntimeError: boom"),
])
def test_a_broken_plugin_is_one_line_on_the_command_line(tmp_path, capsys, source, message):
    bad = tmp_path / "broken_plugin.py"
    bad.write_text(source)
    assert main(["score", "dg", "--plugin", str(bad), "--results", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(r"^sandbox: error: .*plugin", err) and re.search(message, err) and "\n" not in err
    assert "Traceback" not in err


def test_cli_lists_batteries_and_needs_a_name(capsys):
    assert main(["score", "--list-batteries"]) == 0
    out = capsys.readouterr().out
    assert "quick v2" in out and "standard v3" in out and "reversal/all-four" in out and "reversal/drop-stale" in out
    assert main(["score"]) == 2
    assert "score needs NAME" in capsys.readouterr().err


def test_the_cli_scores_a_plugin(tmp_path, capsys, monkeypatch):
    import sandbox.scoring.api as api

    monkeypatch.setattr(api, "as_battery", lambda name: build(TINY))
    code = main(["score", "clipped_adv_pg", "--plugin", EXAMPLE, "--set", "c=0.5", "--against", AGAINST, "--workers", "1", "--quiet",
                 "--results", str(tmp_path / "r"), "--out", str(tmp_path / "card")])
    out = capsys.readouterr().out
    assert code == 0 and "6 jobs: 0 reused, 6 computed" in out and "| **clipped_adv_pg[c=0.5]** |" in out
    assert (tmp_path / "card" / "scorecard.png").is_file()
    assert textwrap.dedent(out).count("wrote") == 1
