"""One rule for names (issue 46, R4): a plugin takes a built-in name — an estimator's, a recipe's, a
task's, a friction's — only when told to (``--override NAME``, ``$SANDBOX_OVERRIDE``, or
``replace=True`` in its code); then every command uses the plugin's. A plugin estimator named
``gac`` (a built-in recipe) was accepted, and ``score`` scored the recipe while ``run`` used the plugin."""

from __future__ import annotations

import re
import sys

import pandas as pd
import pytest

from sandbox.cli import main
from sandbox.core.registry import OVERRIDE_ENV
from tests.scoring.test_score import TINY

PLUGIN = '''
from dataclasses import dataclass

from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("gac")
@dataclass(frozen=True)
class NotGac(Estimator):
    """REINFORCE under the recipe's name: -A·log π."""

    def token_loss(self, t: PGTerms):
        return -t.token_advantages * t.logp
'''
TASK_PLUGIN = '''
from dataclasses import dataclass

from sandbox.tasks.base import Task, register_task


@register_task("bandit")  # before the built-in tasks are loaded (they are, lazily, on first use)
@dataclass
class MyBandit(Task):
    """Another bandit."""
'''
CLASH = re.compile(r"sandbox: error: .*estimator 'gac' of the plugin names_gac\.NotGac takes the name of the built-in "
                   r"recipe 'gac'; a plugin takes a built-in name only when told to: --override gac "
                   r"\(\$SANDBOX_OVERRIDE=gac\), or register it with replace=True")


@pytest.fixture(autouse=True)
def restored(monkeypatch):
    """--plugin and --override set these for the workers: restored after each test, as is the registry."""
    from sandbox.estimators import ESTIMATORS

    monkeypatch.setenv(OVERRIDE_ENV, "")
    monkeypatch.setenv("SANDBOX_PLUGINS", "")
    yield
    for module in ("names_gac", "names_bandit"):
        sys.modules.pop(module, None)
    ESTIMATORS._entries.pop("gac", None)  # the refused task plugin registered nothing


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "names_gac.py"
    path.write_text(PLUGIN)
    return str(path)


def one_line(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize("argv", [["score", "gac", "--plugin", "{p}", "--battery", "quick"],
                                  ["run", "--plugin", "{p}", "--set", "estimator=gac", "--no-store"],
                                  ["check", "--plugin", "{p}", "x.yaml"]])
def test_a_plugin_estimator_named_like_a_builtin_recipe_is_refused_naming_the_clash_and_the_flag(plugin, capsys, argv):
    line = one_line(capsys, *[a.format(p=plugin) for a in argv])
    assert CLASH.match(line), line


def test_a_plugin_task_named_like_a_builtin_task_is_refused_the_same_way(tmp_path, capsys):
    path = tmp_path / "names_bandit.py"
    path.write_text(TASK_PLUGIN)
    line = one_line(capsys, "run", "--plugin", str(path), "--set", "task=bandit", "--no-store")
    assert re.search(r"task 'bandit' of the plugin names_bandit\.\w+ takes the name of the built-in task 'bandit' "
                     r"\(sandbox\.tasks\.[\w.]+\); .* --override bandit", line), line


def test_with_the_flag_score_and_run_both_use_the_plugin(plugin, tmp_path, monkeypatch, capsys):
    """The plugin is REINFORCE under the name ``gac``: with ``--override gac`` both commands give
    REINFORCE's numbers for ``gac``, to the bit, and the recipe (PPO + gradient-alignment control)
    is not what ``score`` builds."""
    from sandbox.methods import method
    from sandbox.scoring import score
    from sandbox.scoring.recipes import make_recipe

    assert make_recipe("gac").controllers  # the recipe, before the plugin
    monkeypatch.setenv(OVERRIDE_ENV, "gac")  # what --override sets, for this process and its workers
    frame = score("gac", plugin=plugin, battery=TINY, against="reinforce", results=tmp_path / "r", workers=1,
                  progress=False)
    assert make_recipe("gac").estimator == "gac" and not make_recipe("gac").controllers
    assert method("gac") == {"estimator": "gac"}
    values = frame.pivot_table(index=["cell", "seed"], columns="method", values="value")
    assert len(values) == 5 and values["gac"].tolist() == values["reinforce"].tolist()

    monkeypatch.setenv(OVERRIDE_ENV, "")
    sys.modules.pop("names_gac", None)
    from sandbox.estimators import ESTIMATORS

    ESTIMATORS._entries.pop("gac", None)
    out = {}
    for name, extra in (("gac", ["--override", "gac", "--plugin", plugin]), ("reinforce", [])):
        path = tmp_path / f"{name}.csv"
        assert main(["run", *extra, "--set", "task=bandit", "--set", f"estimator={name}", "--set", "steps=4",
                     "--no-store", "--quiet", "--out", str(path)]) == 0, capsys.readouterr().err
        out[name] = pd.read_csv(path)
    assert set(out["gac"]["estimator"]) == {"gac"}
    numbers = [c for c in out["gac"].select_dtypes("number").columns if c not in ("seed", "wall_time")]
    assert len(numbers) > 10
    pd.testing.assert_frame_equal(out["gac"][numbers], out["reinforce"][numbers])
