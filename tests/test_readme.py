"""The README's examples run as written; the CI script runs the README's test command."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import torch

from .doc_examples import PLUGIN_BLOCKS, README, setup_commands
from .doc_examples import code as blocks

ROOT = README.parent


def test_two_setup_commands_at_the_top():
    main_job, test_job = setup_commands()
    assert main_job.startswith("pip install torch==2.13.0 && pip install -e")
    assert test_job.startswith("pip install torch==2.13.0 && pip install -e")
    assert "pytest" in test_job
    head = README.read_text()[:600]
    assert main_job in head and test_job in head


def test_ci_runs_the_readme_test_command():
    _, test_job = setup_commands()
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_job in ci


def test_python_blocks_run_in_order(tmp_path):
    from sandbox.envs.mnist import find_test_split

    skip = PLUGIN_BLOCKS | (set() if find_test_split() is not None else {"needs-mnist"})
    code = "\n".join(code for marker, code in blocks("python") if marker not in skip)
    script = tmp_path / "readme_tour.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def _extension_code() -> str:
    found = [code for marker, code in blocks("python") if marker == "extension"]
    assert len(found) == 1, "README must hold exactly one block marked <!-- test: extension -->"
    return found[0]


def test_the_extension_block_is_the_example_plugin_file():
    # one source: the README shows examples/my_estimators.py, which the scoring tests and
    # benchmarks/first_score.py load as the plugin a user saves
    assert _extension_code().strip() == (ROOT / "examples" / "my_estimators.py").read_text().strip()


def test_extension_example_is_short_and_works(tmp_path, monkeypatch):
    code = _extension_code()
    assert len([line for line in code.splitlines() if line.strip()]) <= 20
    (tmp_path / "my_estimators.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("my_estimators")
    from sandbox import ESTIMATORS, PGTerms, make_estimator

    try:
        est = make_estimator("clipped_adv_pg", c=0.5)
        assert isinstance(est, module.ClippedAdvantagePG)
        logp = torch.log(torch.tensor([[0.5], [0.25]]))
        adv = torch.tensor([2.0, -0.1])
        got = est(PGTerms(logp=logp, advantages=adv)).loss
        want = make_estimator("reinforce")(PGTerms(logp=logp, advantages=torch.tensor([0.5, -0.1]))).loss
        assert got.item() == pytest.approx(want.item())
        with pytest.raises(ValueError, match="c must be > 0"):
            make_estimator("clipped_adv_pg", c=0.0)
    finally:
        ESTIMATORS._entries.pop("clipped_adv_pg", None)
        sys.modules.pop("my_estimators", None)


def test_extension_plugin_shows_in_sandbox_list(tmp_path):
    (tmp_path / "my_estimators.py").write_text(_extension_code())
    result = subprocess.run(
        [sys.executable, "-m", "sandbox.cli", "--plugin", "my_estimators.py", "list", "estimators"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "clipped_adv_pg" in result.stdout and "REINFORCE with the advantage clipped" in result.stdout


@pytest.mark.parametrize("marker, file, below", [("add-environment", "sort_tokens.py", 0.3),
                                                 ("add-friction", "flipped_reward.py", 0.5)])
def test_add_an_environment_and_a_friction_are_one_file_each(tmp_path, marker, file, below):
    """The block is a whole plugin file whose first line is the command that trains it: run as
    written, it learns (final error below ``below``; both start near 0.75–0.9)."""
    found = [code for m, code in blocks("python") if m == marker]
    assert len(found) == 1, f"README must hold exactly one block marked <!-- test: {marker} -->"
    code = found[0]
    assert len([line for line in code.splitlines() if line.strip()]) <= 30
    first = code.splitlines()[0]
    assert first.startswith("# run: sandbox run --plugin FILE "), first
    (tmp_path / file).write_text(code)
    argv = [file if arg == "FILE" else arg for arg in shlex.split(first.removeprefix("# run: "))]
    env = dict(os.environ, OMP_NUM_THREADS="1", SANDBOX_RESULTS=str(tmp_path / "results"))
    result = subprocess.run([sys.executable, "-m", "sandbox.cli", *argv[1:]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    final = re.search(r"^  final +([0-9.e-]+)$", result.stdout, re.M)
    assert final is not None and float(final.group(1)) < below, result.stdout


def _policy_examples() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Add a policy"):]
    section = section[: section.index("\n## ")]
    return re.findall(r"\]\((examples/[^)]+\.py)\)", section)


def test_add_a_policy_shows_a_sequence_and_a_contextual_example():
    assert _policy_examples() == ["examples/linear_softmax_policy.py", "examples/low_rank_bandit_policy.py"]


@pytest.mark.parametrize("example", _policy_examples())
def test_add_a_policy_is_one_file_that_trains(tmp_path, example):
    """The README's "Add a policy" links whole plugin files (a new ``Policy`` family each) whose first
    line is the command that trains it on an existing environment (a sequence one, a bandit): run as
    written, the error falls from the initial policy's (about 0.8 on 5-token reversal, 0.9 on the
    10-arm bandit) to below 0.1 and a fifth of where it started."""
    import pandas as pd

    code = (ROOT / example).read_text()
    first = code.splitlines()[0]
    assert first.startswith("# run: sandbox run --plugin FILE "), first
    file = tmp_path / pathlib.Path(example).name
    file.write_text(code)
    argv = [file.name if arg == "FILE" else arg for arg in shlex.split(first.removeprefix("# run: "))]
    env = dict(os.environ, OMP_NUM_THREADS="1", SANDBOX_RESULTS=str(tmp_path / "results"))
    result = subprocess.run([sys.executable, "-m", "sandbox.cli", *argv[1:]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    final = re.search(r"^  final +([0-9.e-]+)$", result.stdout, re.M)
    assert final is not None and float(final.group(1)) < 0.1, result.stdout
    stored = re.search(r"^stored: (\S+)", result.stdout, re.M)
    frame = pd.read_parquet(stored.group(1)).sort_values("step")
    assert frame.error.iloc[0] > 0.5 and frame.error.iloc[-1] < frame.error.iloc[0] / 5, frame[["step", "error"]]
