"""What a user types wrong ends in one line on stderr naming the argument and what is valid (exit 2),
before any training; nothing ends in a traceback (issue 12: "No silent traps")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: this checkout first, whatever the working folder (an editable install may point elsewhere)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def sandbox(*args: str, cwd: Path = ROOT, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sandbox.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def in_process(capsys, *args: str, code: int = 2) -> str:
    """The same check without a new interpreter (for the variants of a case tested by subprocess)."""
    assert main(list(args)) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def one_line_error(result: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    err = result.stderr.strip()
    assert result.returncode == code, (result.returncode, result.stdout, err)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_missing_and_malformed_config_files(tmp_path, capsys, monkeypatch):
    one_line_error(sandbox("run", "--config", "missing.json", cwd=tmp_path), "--config missing.json", "no such file")
    (tmp_path / "bad.json").write_text('{"task": "bandit",}')
    one_line_error(sandbox("run", "--config", "bad.json", cwd=tmp_path), "--config bad.json", "invalid JSON at line 1")
    (tmp_path / "list.json").write_text("[1, 2]")
    monkeypatch.chdir(tmp_path)
    assert "expected a JSON object" in in_process(capsys, "run", "--config", "list.json")


def test_broken_plugins(tmp_path, capsys, monkeypatch):
    (tmp_path / "syntax.py").write_text("def f(:\n")
    one_line_error(sandbox("--plugin", "syntax.py", "list", cwd=tmp_path), "--plugin 'syntax.py'", "SyntaxError", "line 1")
    (tmp_path / "imports_q.py").write_text("import no_such_module_q\n")
    (tmp_path / "raises_q.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.chdir(tmp_path)
    try:
        assert "failed to load: ModuleNotFoundError" in in_process(capsys, "--plugin", "imports_q.py", "list")
        assert "failed to load: RuntimeError: boom" in in_process(capsys, "--plugin", "raises_q.py", "list")
    finally:
        for name in ("imports_q", "raises_q"):
            sys.modules.pop(name, None)


def test_unwritable_out_fails_before_training(tmp_path):
    err = one_line_error(sandbox("run", "--set", "steps=100000", "--out", "/nonexistent/x.parquet", cwd=tmp_path),
                         "--out /nonexistent/x.parquet", "does not exist")
    assert "run " not in err and not (tmp_path / "results").exists()


def test_negative_workers_is_a_usage_error():
    one_line_error(sandbox("sweep", "--workers", "-3"), "sandbox sweep: error: argument --workers: must be an "
                   "integer ≥ 1, got -3", "--help")


@pytest.mark.parametrize("args, needle", [
    (("reproduce", "--workers", "0"), "argument --workers: must be an integer ≥ 1, got 0"),
    (("run", "--seeds", "two"), "argument --seeds: must be an integer ≥ 1, got 'two'"),
    (("run", "--async-workers", "-1"), "argument --async-workers: must be an integer ≥ 0"),
])
def test_bad_numbers_are_usage_errors(args, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err


def test_staleness_without_kind_names_the_kinds():
    one_line_error(sandbox("run", "--set", "staleness.D=8", "--no-store", "--quiet"),
                   "staleness D=8 needs a kind", "fixed, uniform, geometric, per_actor")


def test_ray_options_without_ray_are_errors_not_ignored(capsys):
    err = in_process(capsys, "run", "--async-mode", "bounded", "--no-store")
    assert "--async-mode" in err and "--async-workers" in err and "staleness.kind=fixed" in err
    assert "--ray-address needs --backend ray" in in_process(capsys, "sweep", "gate", "--ray-address", "auto")


def test_ray_address_without_a_cluster_says_to_start_one(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_line_error(sandbox("sweep", "gate", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}",
                           "--results", str(tmp_path)), f"--ray-address 127.0.0.1:{port}", "ray start --head")
    err = in_process(capsys, "reproduce", "gate", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}",
                     "--results", str(tmp_path), "--figures", str(tmp_path / "f"))
    assert "ray start --head" in err
    assert "--ray-address" in in_process(capsys, "sweep", "gate", "--backend", "ray", "--ray-address", "nohostport")


def test_unexpected_errors_are_one_line_with_a_hint(tmp_path):
    (tmp_path / "boom.py").write_text(
        "from dataclasses import dataclass\n"
        "from sandbox import Estimator, register_estimator\n"
        "@register_estimator('boom')\n@dataclass(frozen=True)\nclass Boom(Estimator):\n"
        "    def token_loss(self, terms):\n"
        "        if terms.logp.shape[-1] == 1:  # a bandit's one token: not the contract check's toy batch\n"
        "            raise RuntimeError('kaboom')\n"
        "        return -terms.token_advantages * terms.logp\n")
    err = one_line_error(sandbox("--plugin", "boom.py", "run", "--set", "estimator=boom", "--set", "steps=2",
                                 "--no-store", "--quiet", cwd=tmp_path), "RuntimeError: kaboom", "-v", code=1)
    assert err.startswith("sandbox: error:")


def test_list_into_a_closed_pipe_ends_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "sandbox.cli", "list"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("Estimators")
    proc.stdout.close()  # like `sandbox list | head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) in (0, 141)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_everything_listed_runs(tmp_path):
    # prob_gate is registered by the library (it used to live in a figure module: listed, not runnable)
    result = sandbox("run", "--set", "estimator=prob_gate", "--set", "steps=2", "--no-store", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "bandit / prob_gate" in result.stdout


def test_a_non_integer_population_is_one_line(capsys):
    # RunConfig rejects it with a ValueError; the CLI prints any ValueError as one line, exit 2
    err = in_process(capsys, "run", "--set", "task_kwargs.population=2.5", "--no-store", "--quiet")
    assert "population must be an integer" in err and "2.5" in err


def test_bench_names_and_passthrough_arguments(capsys, monkeypatch):
    assert "unknown benchmark(s) ['nope']" in in_process(capsys, "bench", "nope")
    with pytest.raises(SystemExit) as exit_:
        main(["list", "--", "--steps", "3"])
    assert exit_.value.code == 2 and "only sandbox bench takes them" in capsys.readouterr().err
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda cmd: calls.append(cmd) or 0)
    assert main(["bench", "async", "--", "--steps", "3"]) == 0
    assert calls[0][-3:] == [str(ROOT / "benchmarks" / "async.py"), "--steps", "3"]
