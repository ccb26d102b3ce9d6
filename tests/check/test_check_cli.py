"""``sandbox check`` end to end on the tiny battery of conftest.py (a test-only budget: the deployment
cells take its environments): a verl and a TRL fixture go from file to check.md|png|json in one
command; bad input is one line on stderr and exit 2 before any compute; ``sandbox.check`` is the
same from Python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import sandbox
from sandbox.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name, estimator, cells", [
    # control, reuse, top-p (processed log-probs), bf16 (both correct a mismatch: its cell by default), all
    ("verl_rollout_rs.yaml", "rollout_rs", 5),
    ("trl_cispo.json", "cispo", 5),
])
def test_a_config_file_to_check_md_in_one_command(tiny, tmp_path, capsys, name, estimator, cells):
    out = tmp_path / "check"
    code = main(["check", str(FIXTURES / name), "--out", str(out), "--results", str(tmp_path / "r"),
                 "--against", "reinforce", "--deployment-against", "all", "--workers", "1", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.index("their key") < printed.index("deployment v2") < printed.index("jobs:")  # the table first
    assert f"{2 * (cells + 2)} jobs: 0 reused, {2 * (cells + 2)} computed" in printed
    assert {p.name for p in out.iterdir()} == {"check.md", "check.png", "check.json", "tiny-check"}
    md = (out / "check.md").read_text()
    assert md.startswith(f"# Check: `{Path(name).stem}`")
    for part in ("**Mapped**: `" + estimator, "**Deployment battery**", "**Battery `tiny-check`**",
                 "| their key | our field | value | note |", "## Scorecard: ", "reversal/deploy-control"):
        assert part in md, part
    card = json.loads((out / "check.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert card["mapping"]["recipe"]["estimator"] == estimator
    assert card["deployment"]["methods"] == [Path(name).stem, "reinforce"]
    assert len(card["deployment"]["seeds"]) == cells and card["standard"]["battery"] == "tiny-check"
    assert card["verdict"] and all(0 <= s["score"] <= 1 for s in card["deployment"]["scores"])
    assert (out / "check.png").stat().st_size > 10_000
    # again: every job reused
    main(["check", str(FIXTURES / name), "--out", str(out), "--results", str(tmp_path / "r"),
          "--against", "reinforce", "--deployment-against", "all", "--workers", "1", "--quiet"])
    assert f"{2 * (cells + 2)} reused, 0 computed" in capsys.readouterr().out


def test_ignored_keys_are_in_the_report(tiny, tmp_path):
    key = "actor_rollout_ref.actor.use_kl_loss"
    report = sandbox.check(FIXTURES / "verl_grpo_token_tis.yaml", battery="quick", ignore=[key], against="reinforce",
                           out=tmp_path / "o", results=tmp_path / "r", workers=1, progress=False)
    assert report.mapping.ignored == (key,)
    assert f"Ignored on request (`--ignore`): `{key}`." in (tmp_path / "o" / "check.md").read_text()
    assert json.loads((tmp_path / "o" / "check.json").read_text())["mapping"]["ignored"] == [key]
    assert sandbox.check is sys.modules["sandbox.check"] and callable(sandbox.check)  # the package, callable


@pytest.mark.parametrize("argv, message", [
    (["check", str(FIXTURES / "verl_unknown_loss.yaml")],
     "sandbox: error: actor_rollout_ref.actor.policy_loss.loss_mode='gfpo': not a loss the check models"),
    (["check", str(FIXTURES / "verl_grpo_token_tis.yaml")],
     "sandbox: error: actor_rollout_ref.actor.use_kl_loss=True: a KL loss to a reference model is not modelled"),
    (["check", str(FIXTURES / "verl_gspo.yaml"), "--ignore", "trainer.nope"],
     "sandbox: error: --ignore trainer.nope: the config does not set this key"),
    (["check", str(FIXTURES / "verl_gspo.yaml"), "--battery", "huge"], "sandbox: error: --battery must be one of"),
    (["check", str(FIXTURES / "verl_gspo.yaml"), "--against", "nope"], "sandbox: error: --against must name recipes"),
    (["check", "missing.yaml"], "sandbox: error: config file 'missing.yaml' does not exist"),
    (["check", str(FIXTURES / "verl_gspo.yaml"), "--precision", "int4"], "argument --precision: invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_compute(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) if "--precision" in argv else _nothing() as stop:
        code = main(argv + ["--results", str(tmp_path / "r")])
    code = stop.value.code if stop is not None and hasattr(stop, "value") else code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "checks").exists()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
