"""The inputs of issue 36 that were accepted silently or failed late: each is now refused in one
line naming the argument before any work, or does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import sandbox.scoring.api as score_api
from sandbox.check import check
from sandbox.cli import build_parser, main
from sandbox.cli_args import config_from_args
from sandbox.jobs.store import ResultsStore
from sandbox.jobs.sweep import Job, max_workers, run_sweep
from sandbox.runtime.config import RunConfig
from sandbox.scoring import score
from tests.reliability.test_first_hour_inputs import error_line

TRL = str(Path(__file__).resolve().parents[1] / "check" / "fixtures" / "trl_cispo.json")


def _config(*sets: str) -> RunConfig:
    return config_from_args(build_parser().parse_args(["run", *[a for s in sets for a in ("--set", s)]]))


@pytest.fixture
def no_compute(monkeypatch):
    """Any scoring or training work fails the test: the refusal must come first."""
    monkeypatch.setattr(score_api, "score_recipe", lambda *a, **k: pytest.fail("computed before refusing"))
    monkeypatch.setattr("sandbox.runtime.loop.train", lambda *a, **k: pytest.fail("trained before refusing"))


# ----------------------------------------------------------------------------- --set: later wins
def test_a_later_set_wins_whole_objects_and_dotted_keys_alike():
    assert _config('staleness={"kind":"fixed","D":4}', "staleness.D=8").staleness == {"kind": "fixed", "D": 8}
    assert _config("staleness.kind=fixed", "staleness.D=8", 'staleness={"kind":"fixed","D":4}').staleness["D"] == 4
    assert _config('task_kwargs={"K":4}', "task_kwargs.K=8").task_kwargs["K"] == 8
    assert _config("task_kwargs.K=8", 'task_kwargs={"K":4}').task_kwargs == {"K": 4}
    assert _config("estimator=dg", 'estimator_kwargs={"eta":2}', "estimator_kwargs.eta=0.5").estimator_kwargs["eta"] == 0.5
    assert _config("label=a", "label=b").label == "b"


# ----------------------------------------------------------------------------- shared options of score and check
@pytest.mark.parametrize("argv, option", [(["check", TRL, "--results", ""], "--results"),
                                          (["check", TRL, "--out", " "], "--out"),
                                          (["score", "dg", "--results", ""], "--results")],
                         ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_an_empty_results_or_out_folder_is_refused(capsys, no_compute, argv, option):
    assert error_line(capsys, *argv) == (f"sandbox: error: {option} is empty; give a path (an empty one would write "
                                         "into the current folder)")


@pytest.mark.parametrize("call", [lambda: score("dg", results=""), lambda: check(TRL, results=""),
                                  lambda: check(TRL, out="")], ids=["score", "check", "check out"])
def test_the_api_refuses_an_empty_folder(no_compute, call):
    with pytest.raises(ValueError, match=r"^(results|out) is empty; give a folder \(an empty one would write into "
                                         r"the current folder\)$"):
        call()


def test_check_out_is_checked_before_any_compute(capsys, no_compute, tmp_path, monkeypatch):
    monkeypatch.setattr("sandbox.check.prepare", lambda *a, **k: pytest.fail("mapped before checking --out"))
    (tmp_path / "afile").write_text("")
    assert error_line(capsys, "check", TRL, "--out", str(tmp_path / "afile")) == \
        f"sandbox: error: --out {tmp_path / 'afile'}: exists and is not a folder"
    with pytest.raises(ValueError, match="out .*afile: exists and is not a folder"):
        check(TRL, out=tmp_path / "afile")


@pytest.mark.parametrize("command", [["score", "dg"], ["check", TRL], ["sweep", "gate"]], ids=lambda c: c[0])
def test_a_ray_address_without_the_ray_backend_is_refused(capsys, no_compute, command):
    assert error_line(capsys, *command, "--ray-address", "127.0.0.1:6379") == \
        "sandbox: error: --ray-address needs --backend ray (without it the address would be ignored)"


def test_the_api_refuses_a_ray_address_without_the_ray_backend(no_compute):
    for call in (lambda: score("dg", ray_address="127.0.0.1:6379"), lambda: check(TRL, ray_address="x:1")):
        with pytest.raises(ValueError, match=r"ray_address '.*' needs backend='ray' \(it would be ignored\)"):
            call()


@pytest.mark.parametrize("command", [["score", "dg"], ["check", TRL], ["sweep", "gate"], ["reproduce", "gate"]],
                         ids=lambda c: c[0])
def test_workers_are_bounded_with_the_range_in_the_message(capsys, no_compute, command):
    high = max_workers("local")
    assert error_line(capsys, *command, "--workers", "1000") == (
        f"sandbox: error: --workers must be None or an integer in 1..{high} (4 per CPU of this machine's "
        f"{high // 4}), got 1000")


@pytest.mark.parametrize("workers", [True, 0, 10**6, 2.0])
def test_the_api_refuses_workers_that_are_no_count(no_compute, tmp_path, workers):
    for call in (lambda: score("dg", workers=workers), lambda: check(TRL, workers=workers),
                 lambda: run_sweep([], ResultsStore(tmp_path), workers=workers)):
        with pytest.raises(ValueError, match=rf"^workers must be None or an integer in 1\.\.\d+ .*, got {workers!r}$"):
            call()


# ----------------------------------------------------------------------------- plugins
def test_a_plugin_that_exits_on_import_is_named(capsys, tmp_path):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(3)\n")
    assert error_line(capsys, "--plugin", str(tmp_path / "exits_on_import.py"), "list", "estimators") == (
        f"sandbox: error: --plugin '{tmp_path}/exits_on_import.py' failed to load: it called sys.exit(3) while being "
        "imported")


def test_a_failing_entry_of_sandbox_plugins_is_named(capsys, tmp_path, monkeypatch):
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no GPU here')\n")
    (tmp_path / "exits_too.py").write_text("raise SystemExit\n")
    monkeypatch.setenv("SANDBOX_PLUGINS", str(tmp_path / "raises_on_import.py"))
    assert error_line(capsys, "list", "estimators") == (
        f"sandbox: error: SANDBOX_PLUGINS: plugin '{tmp_path}/raises_on_import.py' failed to load: RuntimeError: no "
        "GPU here")
    monkeypatch.setenv("SANDBOX_PLUGINS", str(tmp_path / "exits_too.py"))
    assert error_line(capsys, "list", "estimators") == (
        f"sandbox: error: SANDBOX_PLUGINS: plugin '{tmp_path}/exits_too.py' failed to load: it called sys.exit() while "
        "being imported")


BROKEN = '''
from dataclasses import dataclass
from sandbox import Estimator, EstimatorOutput, register_estimator


@register_estimator("{name}")
@dataclass(frozen=True)
class Broken(Estimator):
    """Breaks the contract."""

    def token_loss(self, t):
        return {body}
'''


@pytest.mark.parametrize("name, body, breach", [
    ("float_loss_pg", "0.5", "its token_loss returned a float, not a tensor [*P, B, T] of per-token losses"),
    ("wrong_shape_pg", "-(t.advantages * t.logp.sum(-1))", "it raised ValueError: wrong_shape_pg.token_loss returned "
                                                          "shape (2, 6), expected logp's (2, 6, 3)"),
    ("detached_pg", "-(t.token_advantages * t.logp).detach()", "its loss does not depend on logp")])
def test_a_plugin_estimator_that_breaks_the_contract_is_caught_once_before_any_job(tmp_path, monkeypatch, name, body,
                                                                                    breach):
    """Checked when a job names it (a NaN loss is a divergence, a result, not a breach)."""
    from sandbox.estimators import ESTIMATORS

    plugin = tmp_path / f"{name}_plugin.py"
    plugin.write_text(BROKEN.format(name=name, body=body))
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))  # the plugin's entry goes after the test
    job = Job("tests.reliability.jobs:tick", {"x": 0, "recipe": {"estimator": name}})  # a job that names it
    monkeypatch.setattr(Job, "run", lambda self: pytest.fail("a job ran before the contract was checked"))
    with pytest.raises(ValueError) as err:
        run_sweep([job], ResultsStore(tmp_path / "r"), workers=1, progress=False, plugins=[str(plugin)])
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"plugin estimator {name!r} ({name}_plugin.Broken) breaks the estimator "
                                                "contract on a toy batch of 2 × 6 × 3 tokens: ")
    assert breach in line, line


# ----------------------------------------------------------------------------- sandbox run
def test_a_seed_beyond_int64_is_refused_at_config_time(capsys, no_compute):
    with pytest.raises(ValueError, match=re.escape("seed must lie in [0, 9223372036854775807], got 18446744073709551616")):
        RunConfig(seed=2**64)
    assert error_line(capsys, "run", "--set", f"seed={2**64}", "--no-store") == \
        "sandbox: error: seed must lie in [0, 9223372036854775807], got 18446744073709551616"


def test_a_config_file_that_is_not_utf8_names_the_option_and_the_file(capsys, tmp_path):
    (tmp_path / "latin1.json").write_bytes('{"label": "café"}'.encode("latin-1"))
    assert error_line(capsys, "run", "--config", str(tmp_path / "latin1.json")) == (
        f"sandbox: error: --config {tmp_path / 'latin1.json'}: not UTF-8 text (byte 14 is 0xe9); expected a JSON object "
        "of RunConfig fields")


def test_a_duplicated_json_key_is_refused_naming_the_key(capsys, tmp_path):
    (tmp_path / "twice.json").write_text('{"steps": 5, "task_kwargs": {"K": 3, "K": 4}}')
    assert error_line(capsys, "run", "--config", str(tmp_path / "twice.json")) == \
        f"sandbox: error: --config {tmp_path / 'twice.json'}: key 'K' appears twice in one object; give it once"
    assert error_line(capsys, "run", "--set", 'staleness={"D": 1, "D": 2}') == \
        "sandbox: error: --set {\"D\": 1, \"D\": 2}: key 'D' appears twice in one object; give it once"


def test_run_out_writes_csv_or_parquet_by_its_suffix_and_refuses_others(capsys, tmp_path):
    assert error_line(capsys, "run", "--out", str(tmp_path / "metrics.txt"), "--no-store") == (
        f"sandbox: error: --out {tmp_path / 'metrics.txt'}: the file's suffix says its format; give one of .parquet, "
        ".csv (e.g. metrics.parquet)")
    for name, read in (("metrics.csv", pd.read_csv), ("metrics.parquet", pd.read_parquet)):
        assert main(["run", "--set", "steps=2", "--set", "task_kwargs.K=3", "--out", str(tmp_path / name),
                     "--no-store", "--quiet"]) == 0
        frame = read(tmp_path / name)
        assert len(frame) and "step" in frame.columns
    assert (tmp_path / "metrics.csv").read_text().startswith(pd.read_csv(tmp_path / "metrics.csv").columns[0])


def test_per_actor_staleness_that_never_delays_is_refused(capsys):
    assert error_line(capsys, "run", "--set", "staleness.kind=per_actor", "--set", "staleness.D=4", "--set",
                      "staleness.n_actors=100", "--set", "steps=20", "--no-store") == (
        "sandbox: error: staleness: per_actor with n_actors=100, D=4 and steps=20 never delays (d_t = (t mod "
        "n_actors)·D // n_actors is 0 at every step): a synchronous run; it delays when n_actors ≥ 2, D ≥ 2 and "
        "n_actors ≤ D·(steps − 1)")
    for staleness in ({"kind": "per_actor", "D": 1, "n_actors": 8}, {"kind": "per_actor", "D": 8, "n_actors": 1}):
        with pytest.raises(ValueError, match="never delays"):
            RunConfig(staleness=staleness)
    RunConfig(staleness={"kind": "per_actor", "D": 4, "n_actors": 100}, steps=100)  # d reaches 3


def test_label_flip_on_the_gaussian_bandit_is_refused_naming_both():
    with pytest.raises(ValueError) as err:
        RunConfig(task="gaussian_bandit", frictions=[("label_flip", {"p": 0.2})])
    assert str(err.value).startswith("frictions[0] label_flip: flips the label of a reward 1[a = y], but task "
                                     "'gaussian_bandit' pays no such reward")
    assert str(err.value).endswith("use it on a task whose reward is a label match: bandit, mnist")
    RunConfig(task="bandit", frictions=[("label_flip", {"p": 0.2})])


def test_a_plugin_estimator_whose_loss_is_a_float_is_caught(tmp_path, monkeypatch):
    from sandbox.estimators import ESTIMATORS

    plugin = tmp_path / "float_call_plugin.py"
    plugin.write_text(BROKEN.format(name="float_call_pg", body="0").replace(
        "    def token_loss(self, t):\n        return 0", "    def __call__(self, t):\n        return EstimatorOutput(0.5, {})"))
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))
    with pytest.raises(ValueError, match="breaks the estimator contract on a toy batch of 2 × 6 × 3 tokens: its loss is a "
                                         "float, not a tensor"):
        run_sweep([Job("m:f", {"estimator": "float_call_pg"})], ResultsStore(tmp_path / "r"), workers=1,
                  progress=False, plugins=[str(plugin)])
