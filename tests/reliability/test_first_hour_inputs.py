"""The inputs of issue 26 that were accepted silently or refused confusingly: each now gives one
line naming the argument before any work starts, or has a documented meaning."""

from __future__ import annotations

import re
import socket
import threading

import pytest
import torch

import sandbox.scoring.api as score_api
from sandbox import PGTerms
from sandbox.cli import main
from sandbox.core.ray_start import check_address
from sandbox.envs.mnist import mnist_data
from sandbox.runtime.config import RunConfig
from sandbox.scoring import score
from sandbox.scoring.batteries.quick import BATTERY
from sandbox.tasks import make_task

PLUGIN = '''
from dataclasses import dataclass
from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("{name}")
@dataclass(frozen=True)
class Mine(Estimator):
    """REINFORCE with the advantage clipped to [−c, c]."""

    c: float = 1.0

    def token_loss(self, t: PGTerms):
        return -t.token_advantages.clamp(-self.c, self.c) * t.logp
'''


def error_line(capsys, *argv: str) -> str:
    """Run the CLI in this process; require exit code 2 and one line on stderr, and return it."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize("argv", [["reproduce", "--results", ""], ["sweep", "--results", ""],
                                  ["run", "--results", "", "--set", "steps=1"], ["reproduce", "--figures", " "],
                                  ["score", "dg", "--results", ""], ["score", "dg", "--out", ""]],
                         ids=lambda a: " ".join(a))
def test_an_empty_path_is_refused_not_the_current_folder(capsys, argv):
    option = next(a for a in argv if a.startswith("--") and a != "--set")
    assert error_line(capsys, *argv) == (f"sandbox: error: {option} is empty; give a path (an empty one would write "
                                         "into the current folder)")


def test_against_nothing_is_refused_and_says_how_to_score_one_alone(capsys):
    line = error_line(capsys, "score", "dg", "--against", "")
    assert line.startswith("sandbox: error: against names no method; give recipes or estimators, comma-separated "
                           "(to score one alone, name it: --against NAME); valid: reinforce, pg, is_pg, tis, ppo,")


def test_a_plugin_named_like_a_standard_module_is_refused(capsys, tmp_path):
    (tmp_path / "json.py").write_text("raise SystemExit('never imported')\n")
    line = error_line(capsys, "--plugin", str(tmp_path / "json.py"), "list", "estimators")
    assert re.fullmatch(rf"sandbox: error: --plugin file '{re.escape(str(tmp_path))}/json.py': its name 'json' is "
                        r"taken by the module json \(.*json/__init__.py\); rename the file, e.g. my_json.py", line), line


def test_a_missing_plugin_in_the_environment_is_named(capsys, monkeypatch):
    monkeypatch.setenv("SANDBOX_PLUGINS", "/nonexistent.py")
    assert error_line(capsys, "list", "estimators") == \
        "sandbox: error: SANDBOX_PLUGINS: plugin file '/nonexistent.py' does not exist"


def test_a_plugin_that_registers_a_taken_name_names_the_real_option(capsys, tmp_path):
    (tmp_path / "dup_dg.py").write_text(PLUGIN.format(name="dg"))
    assert error_line(capsys, "--plugin", str(tmp_path / "dup_dg.py"), "list") == (
        f"sandbox: error: --plugin '{tmp_path}/dup_dg.py' failed to load: ValueError: estimator 'dg' of the plugin "
        "dup_dg.Mine takes the name of the built-in estimator 'dg' (sandbox.estimators.delight.Delight); a plugin "
        "takes a built-in name only when told to: --override dg ($SANDBOX_OVERRIDE=dg), or register it with replace=True")


def test_plugin_after_the_subcommand_and_a_plugins_estimator_by_name(capsys, tmp_path, monkeypatch):
    from sandbox.estimators import make_estimator

    plugin = tmp_path / "first_hour_estimators.py"
    plugin.write_text(PLUGIN.format(name="first_hour_pg"))
    with pytest.raises(ValueError, match=r"unknown estimator 'first_hour_pg'; known: .* \(a plugin's estimator is "
                                         r"known once its module is imported: import it, or list its file in "
                                         r"\$SANDBOX_PLUGINS\)"):
        make_estimator("first_hour_pg")
    monkeypatch.setenv("SANDBOX_PLUGINS", str(plugin))
    assert make_estimator("first_hour_pg", c=0.5).c == 0.5  # imported on first use
    monkeypatch.delenv("SANDBOX_PLUGINS")
    assert main(["list", "--plugin", str(plugin), "estimators"]) == 0
    assert "first_hour_pg" in capsys.readouterr().out


def test_a_nonexistent_mnist_folder_is_refused_not_passed_over():
    message = ("data_dir '/nonexistent' is not a folder; give the folder that holds the MNIST IDX files, or leave "
               "data_dir unset to search $SANDBOX_MNIST_DIR, shared/data/mnist and the cache")
    with pytest.raises(ValueError, match=re.escape(f"task_kwargs: {message}")):
        RunConfig(task="mnist", task_kwargs={"data_dir": "/nonexistent"})
    with pytest.raises(ValueError, match=re.escape(message)):
        mnist_data(data_dir="/nonexistent")


def test_the_score_report_folder_is_checked_before_any_compute(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(score_api, "run_battery", lambda *a, **k: pytest.fail("computed before checking --out"))
    (tmp_path / "afile").write_text("")
    assert error_line(capsys, "score", "dg", "--out", str(tmp_path / "afile"), "--results", str(tmp_path)) == \
        f"sandbox: error: --out {tmp_path / 'afile'}: exists and is not a folder"
    with pytest.raises(ValueError, match="out .*afile: exists and is not a folder"):
        score("dg", out=tmp_path / "afile", results=tmp_path)


def test_a_schedule_ray_cannot_realise_is_refused_before_ray_starts(capsys, monkeypatch):
    import sandbox.core.processes as processes

    monkeypatch.setattr(processes, "start_ray", lambda *a, **k: pytest.fail("Ray started"))
    assert error_line(capsys, "run", "--async-workers", "1", "--set", "staleness.kind=fixed", "--set", "staleness.D=2",
                      "--set", "history=rollouts", "--no-store") == (
        "sandbox: error: history='rollouts' samples the batches in the learner's process, but on Ray the "
        "workers sample them: set history='params'")


def test_an_address_that_answers_but_is_not_ray_is_one_line_at_once():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_like_a_web_server() -> None:
        conn, _ = server.accept()
        conn.recv(64)
        conn.sendall(b"HTTP/1.0 400 Bad request\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_like_a_web_server, daemon=True).start()
    with pytest.raises(ValueError) as err:
        check_address(f"127.0.0.1:{port}")
    server.close()
    assert str(err.value) == (f"--ray-address 127.0.0.1:{port}: something answers there, but not a Ray cluster (it "
                              "does not speak gRPC); start one with `ray start --head` (or leave out --ray-address "
                              "to start a local Ray)")


def test_set_gives_text_fields_the_text(tmp_path, capsys):
    from sandbox.cli import build_parser
    from sandbox.cli_args import config_from_args

    def config(*sets: str) -> RunConfig:
        return config_from_args(build_parser().parse_args(["run", *[a for s in sets for a in ("--set", s)]]))

    assert config("label=123").label == "123"
    assert config("advantage=null").advantage == "group_mean"  # null is None (the task's default) …
    assert config("advantage=rloo").advantage == "rloo"  # … where the field may be None
    assert config("label=true", "steps=5").steps == 5  # numbers still parse as JSON
    assert config("task=mnist", "task_kwargs.data_dir=" + str(tmp_path)).task_kwargs["data_dir"] == str(tmp_path)
    assert config("task_kwargs.K=12").task_kwargs["K"] == 12
    assert error_line(capsys, "run", "--set", "estimator=dg", "--set", "estimator_kwargs.aggregation=123") == (
        "sandbox: error: estimator_kwargs: aggregation must be one of ['token-mean', 'seq-mean-token-mean', "
        "'seq-mean-token-sum', 'seq-mean-token-sum-norm'], got '123'")


def test_positive_log_probabilities_are_refused():
    logp = torch.tensor([[-0.5, 0.7]])
    with pytest.raises(ValueError, match=re.escape("logp must hold log-probabilities (≤ 0) at valid tokens, got a value "
                                                   "of 0.7: pass log π, not π or logits")):
        PGTerms(logp=logp, advantages=torch.ones(1))
    PGTerms(logp=logp, advantages=torch.ones(1), mask=torch.tensor([[True, False]]))  # a padded token may hold anything
    with pytest.raises(ValueError, match="behavior_logp must hold log-probabilities"):
        PGTerms(logp=-logp.abs(), advantages=torch.ones(1), behavior_logp=logp)


def test_an_empty_battery_is_one_line():
    with pytest.raises(ValueError, match=re.escape("battery 'none': cells is empty; a battery needs at least one cell")):
        score("dg", battery={**BATTERY, "name": "none", "cells": []})


@pytest.mark.parametrize("task, kwargs, named", [("bandit", {"population": 10**8}, "population=100000000"),
                                                 ("bandit", {"K": 10**12}, "K=1000000000000"),
                                                 ("mnist", {"population": 10**8}, "population=100000000"),
                                                 ("sequences", {"width": 10**6}, "width=1000000")])
def test_sizes_that_cannot_fit_are_refused_with_the_estimate(task, kwargs, named):
    pattern = (rf"task '{task}' with {named} would need about [\d,.]+ GiB of memory \(parameters .* GiB × 5 copies "
               r"\(values, gradients, Adam's moments, actor\), a step's batch .* GiB\), more than this machine's "
               r"[\d.]+ GiB; use smaller sizes")
    with pytest.raises(ValueError, match="task_kwargs: " + pattern):
        RunConfig(task=task, task_kwargs=kwargs)
    with pytest.raises(ValueError, match=pattern):
        make_task(task, **kwargs)


def test_stale_snapshots_count_and_steps_cost_time_not_memory():
    with pytest.raises(ValueError, match=r"task_kwargs: task 'bandit' with N=1000, K=100000 and staleness D=100000 "
                                         r"\(history='params' keeps 100000 stale copies\) would need about"):
        RunConfig(task_kwargs={"N": 1000, "K": 10**5}, staleness={"kind": "fixed", "D": 10**5}, steps=10**6)
    RunConfig(task_kwargs={"N": 1000, "K": 10**5}, staleness={"kind": "fixed", "D": 10**5}, steps=1)  # one copy kept
    assert RunConfig(steps=10**9).steps == 10**9  # no per-step state: a long run (≥ 28 h), shown by its progress bar
    with pytest.raises(ValueError, match=r"^steps 100000000000 of task 'bandit' would take at least 2,778 h"):
        RunConfig(steps=10**11)  # but not beyond the time limit (issue 46, item 5)
