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


def test_list_frictions_tasks_and_figures(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("landmine", "rare_discovery", "precision_mismatch", "bandit", "mnist", "hf_text", "reverse_copy",
                 "prop1-single-context", "mnist-staleness", "kondo", "llm-staleness"):
        assert f"  {name} " in out, name


def test_list_one_table(capsys):
    assert main(["list", "controllers"]) == 0
    out = capsys.readouterr().out
    assert "Controllers" in out and "Estimators" not in out


def test_list_policies_and_objectives_with_what_they_read(capsys):
    assert main(["list", "policies"]) == 0
    out = capsys.readouterr().out
    assert "Policies" in out and "Estimators" not in out and "Objectives" not in out
    for name, reads in (("tabular", "context ids"), ("mlp", "context ids or context vectors"),
                        ("transformer", "token prompts"), ("causal_lm", "text prompts or token prompts")):
        assert f"  {name} " in out and f"reads {reads}:" in out, name
    assert main(["list", "objectives"]) == 0
    out = capsys.readouterr().out
    assert "reads context ids or context vectors:" in out and "reads any observations:" in out and "  screened " in out


def test_missing_plugin_is_a_clear_error(capsys):
    assert main(["--plugin", "no_such_module_xyz", "list"]) == 2
    assert "--plugin module 'no_such_module_xyz' cannot be imported" in capsys.readouterr().err
    assert main(["--plugin", "missing.py", "list"]) == 2
    assert "--plugin file 'missing.py' does not exist" in capsys.readouterr().err


def test_run_prints_final_metrics(capsys, tmp_path):
    out = tmp_path / "run.parquet"
    code = main(["run", "--set", "task=bandit", "--set", "task_kwargs.K=5", "--set", "task_kwargs.population=3",
                 "--set", "estimator=dg", "--set", "steps=5", "--quiet", "--out", str(out), "--no-store"])
    assert code == 0
    text = capsys.readouterr().out
    assert "bandit / dg, 3 seeds (a population), step 5" in text and "error" in text
    assert out.is_file()


def test_run_rejects_bad_overrides(capsys):
    assert main(["run", "--set", "stepz=3"]) == 2
    assert "unknown RunConfig field(s) ['stepz']" in capsys.readouterr().err
    assert main(["run", "--set", "steps"]) == 2
    assert "--set expects key=value" in capsys.readouterr().err


def test_reproduce_unknown_figure(capsys):
    assert main(["reproduce", "no-such-figure"]) == 2
    assert "unknown figure or group 'no-such-figure'" in capsys.readouterr().err


def test_reproduce_prints_the_claim_table(capfd, tmp_path):
    code = main(["reproduce", "gate", "--results", str(tmp_path / "r"), "--figures", str(tmp_path / "f"),
                 "--workers", "1"])
    text, err = capfd.readouterr()  # capfd: the kernel's own stderr too
    assert code == 0, text
    assert "CHECK" in text and "claims passed" in text and "gate.png" in text
    assert "without encryption" not in err  # the kernel listens on IPC sockets, not TCP
    assert all(len(line) <= 120 for line in text.splitlines()[-4:])  # the per-figure lines fit 120 columns


def test_sweep_of_several_figures_reports_each(monkeypatch, tmp_path, capsys):
    """Each named figure's sweep runs and prints its line (the second one crashed: a name was reused)."""
    import types

    import sandbox.jobs.sweep as sweep_module

    ran = []

    def fake_sweep(jobs, store, **kwargs):
        ran.append(kwargs["desc"])
        return types.SimpleNamespace(total=len(jobs), skipped=0, computed=len(jobs), failed={})

    monkeypatch.setattr(sweep_module, "run_sweep", fake_sweep)
    assert main(["sweep", "gate", "prop1-single-context", "--results", str(tmp_path), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert ran == ["gate", "prop1-single-context"]
    assert "gate: 1 job, 0 already done, 1 computed, 0 failed" in out and "prop1-single-context: " in out
