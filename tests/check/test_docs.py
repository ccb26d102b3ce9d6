"""docs/check.md's complete example runs as written, at a small budget: its config block is the
verl fixture, its command goes from that file to check.md in one call, and the mapping table it
shows is the one the command prints today."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from sandbox.check import map_config
from sandbox.cli import main
from tests.doc_examples import code as blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "check.md"
FIXTURE = Path(__file__).parent / "fixtures" / "verl_dapo_async.yaml"


def _block(lang: str, marker: str) -> str:
    found = [code for m, code in blocks(lang, DOC) if m == marker]
    assert len(found) == 1, f"docs/check.md needs one {lang} block marked <!-- test: {marker} -->"
    return found[0]


def test_the_example_config_is_the_fixture():
    assert yaml.safe_load(_block("yaml", "check-config")) == yaml.safe_load(FIXTURE.read_text())


def test_the_example_runs_from_file_to_check_md(tiny, tmp_path, monkeypatch, capsys):
    command = shlex.split(_block("bash", "check-example").strip())
    assert command[:2] == ["sandbox", "check"]
    monkeypatch.chdir(tmp_path)
    Path(command[2]).write_text(_block("yaml", "check-config"))
    # the small budget: the tiny battery (conftest.py), one process, one built-in
    code = main(command[1:] + ["--results", str(tmp_path / "r"), "--workers", "1", "--quiet", "--against", "reinforce"])
    printed = capsys.readouterr().out
    assert code == 0
    out = Path(command[command.index("--out") + 1])
    assert {"check.md", "check.png", "check.json"} <= {p.name for p in out.iterdir()}
    shown = _block("text", "check-output")
    mapping = map_config(command[2], precision="bf16")
    for line in mapping.text().splitlines():  # the doc shows today's table, line for line
        assert line.rstrip() in shown, line
        assert line in printed
    for head in ("**Mapped**", "**Deployment battery**", "**Hurts most**", "**Battery `quick`**"):
        assert head in shown, head


def test_every_mapping_row_names_its_test_or_says_read_not_run():
    """docs/check.md's verl and TRL tables: each row's last cell names a test that exists (in
    tests/conformance or tests/check) or says "read, not run"."""
    import re

    text = (Path(__file__).parents[2] / "docs" / "check.md").read_text()
    tests = {m for p in Path(__file__).parents[1].glob("*/test_*.py") for m in re.findall(r"def (test_\w+)", p.read_text())}
    rows = [line for block in re.findall(r"\| (?:verl|TRL) key \|[^\n]*\n\|[-|]+\|\n((?:\|[^\n]*\n)+)", text)
            for line in block.splitlines()]
    assert len(rows) >= 20
    for row in rows:
        shown = row.rstrip().rstrip("|").rsplit("|", 1)[-1]
        named = re.findall(r"(test_\w+?)(?:\*|\[|`|$)", shown)
        assert named or "read, not run" in shown, row
        for name in named:
            assert name in tests or any(t.startswith(name) for t in tests), f"{name} (in {row[:60]}…) is no test"
