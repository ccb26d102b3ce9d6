"""Cached claims and notebook records (issue 26): each carries a checksum and the code that wrote
it; a truncated or edited one is named in ONE warning line and its notebook executed again, and
nothing aborts the run."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

import sandbox.reproduce as rep
from sandbox.analysis.claim_table import read_claims
from sandbox.analysis.claims import ClaimBook, load_claims
from sandbox.claims_file import claims_markdown
from sandbox.jobs.store import read_record, write_record


def toy_registry(tmp_path: Path, calls: list) -> SimpleNamespace:
    """A figure registry with one figure ("toy", no jobs) whose notebook records one claim."""
    source = tmp_path / "toy.py"
    source.write_text("# %%\n1\n")
    figure = SimpleNamespace(name="toy", jobs=lambda fidelity: [], notebook_path=lambda: source)
    return SimpleNamespace(FIDELITIES=("quick", "paper"), select=lambda names=None: [figure])


@pytest.fixture
def toy(tmp_path, monkeypatch):
    calls: list = []

    def notebook(source, output, env, progress=True):
        calls.append(source)
        ClaimBook("toy", env["SANDBOX_CLAIMS"]).below("small", "x is below 1", [0.1, 0.2, 0.15], 1.0)
        figures = Path(env["SANDBOX_FIGURES"])
        figures.mkdir(parents=True, exist_ok=True)
        (figures / "toy.png").write_bytes(b"png")

    monkeypatch.setattr(rep, "figures", lambda: toy_registry(tmp_path, calls))
    monkeypatch.setattr(rep, "execute_notebook", notebook)
    dirs = {"results_dir": tmp_path / "r", "figures_dir": tmp_path / "f", "workers": 1, "progress": False}
    (first,) = rep.reproduce(**dirs)
    assert first.ok and not first.cached and len(calls) == 1
    return SimpleNamespace(calls=calls, run=lambda: rep.reproduce(**dirs)[0],
                           claims=tmp_path / "r" / "claims" / "toy.quick.json",
                           record=tmp_path / "r" / "notebooks" / "toy.quick.json")


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def edit_estimate(path: Path) -> None:
    """A valid JSON edit: the estimate moved outside its own interval."""
    saved = json.loads(path.read_text())
    saved["data"][0]["estimate"] = 5.0
    path.write_text(json.dumps(saved))


def edit_record(path: Path) -> None:
    saved = json.loads(path.read_text())
    saved["data"]["files"] = ["other.png"]
    path.write_text(json.dumps(saved))


def test_both_files_carry_a_checksum_and_the_code_that_wrote_them(toy):
    for path in (toy.claims, toy.record):
        saved = json.loads(path.read_text())
        assert set(saved) == {"data", "code", "checksum"}
        assert {"version", "source", "modules"} <= set(saved["code"])
        assert read_record(path)[1] == "ok"
    second = toy.run()
    assert second.cached and len(toy.calls) == 1


@pytest.mark.parametrize("which, damage", [("claims", truncate), ("claims", edit_estimate),
                                           ("record", truncate), ("record", edit_record)],
                         ids=["truncated-claims", "edited-claims", "truncated-record", "edited-record"])
def test_a_damaged_file_is_named_in_one_warning_and_its_notebook_executed_again(toy, caplog, which, damage):
    path = getattr(toy, which)
    damage(path)
    with caplog.at_level(logging.WARNING):
        again = toy.run()
    (line,) = warnings_of(caplog)
    assert line.startswith(f"{path} is damaged (") and line.endswith("): executing its notebook again")
    assert "\n" not in line
    assert again.ok and not again.cached and len(toy.calls) == 2
    assert [c.estimate for c in again.claims] == pytest.approx([0.15])  # recomputed, not the edit
    assert read_record(toy.claims)[1] == read_record(toy.record)[1] == "ok"


def test_files_written_before_checksums_are_executed_again_without_a_warning(toy, caplog):
    toy.claims.write_text(json.dumps(json.loads(toy.claims.read_text())["data"]))  # the old format: a bare list
    with caplog.at_level(logging.WARNING):
        again = toy.run()
    assert not warnings_of(caplog) and not again.cached and len(toy.calls) == 2


def test_load_claims_gives_none_of_a_damaged_file_and_says_so_once(tmp_path, caplog):
    path = tmp_path / "c.json"
    ClaimBook("fig", path).below("small", "x is below 1", [0.1, 0.2, 0.15], 1.0)
    assert read_claims(path)[1] == "ok" and len(load_claims(path)) == 1
    edit_estimate(path)
    with caplog.at_level(logging.WARNING):
        assert load_claims(path) == []
    (line,) = warnings_of(caplog)
    assert line.startswith(f"ignoring the damaged claims file {path} (checksum mismatch: truncated or edited)")
    path.write_text('[{"figure": "fig", "name": "unterminated')
    assert read_claims(path)[1:] == ("corrupt", "unreadable: JSONDecodeError: Unterminated string starting at: "
                                                "line 1 column 28 (char 27)")
    write_record(path, [{"not": "a claim"}])
    assert read_claims(path)[1] == "corrupt"


def test_claims_md_names_a_damaged_record_and_goes_on(toy, caplog):
    figure = SimpleNamespace(name="toy")
    truncate(toy.record)
    with caplog.at_level(logging.WARNING):
        text = claims_markdown([figure], "quick", toy.record.parent.parent)
    (line,) = warnings_of(caplog)
    assert line.startswith(f"ignoring the damaged notebook record {toy.record} (unreadable: JSONDecodeError")
    assert "| `toy` | its record was damaged: run `sandbox reproduce toy --fidelity quick` again |" in text
