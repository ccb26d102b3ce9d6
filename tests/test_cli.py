"""``sandbox list`` and the CLI's error handling."""

from __future__ import annotations

from sandbox.advantages import ADVANTAGES
from sandbox.cli import main
from sandbox.controllers import CONTROLLERS
from sandbox.estimators import ESTIMATORS


def test_list_prints_every_registered_entry_with_defaults(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for registry in (ESTIMATORS, ADVANTAGES, CONTROLLERS):
        for name in registry.names():
            assert f"  {name} " in out, name
    assert "eta=1.0, lam=0.0" in out  # DG's defaults
    assert "C=2.0" in out  # TIS's default
    assert "c_proj=0.3, c_skip=0.9" in out  # GAC's thresholds


def test_list_one_table(capsys):
    assert main(["list", "controllers"]) == 0
    out = capsys.readouterr().out
    assert "Controllers" in out and "Estimators" not in out


def test_missing_plugin_is_a_clear_error(capsys):
    assert main(["--plugin", "no_such_module_xyz", "list"]) == 2
    assert "--plugin module 'no_such_module_xyz' cannot be imported" in capsys.readouterr().err
    assert main(["--plugin", "missing.py", "list"]) == 2
    assert "--plugin file 'missing.py' does not exist" in capsys.readouterr().err
