"""Rules and thresholds before data, enforced by ``git log``: every rule of
``simulations/claim_rules.py`` (each top-level assignment, dated by the last of its lines to be
first committed) must be older than the first commit of any per-seed result it judges (the
earliest commit of ``paper_figures/data/FIGURE.parquet`` holding one of the jobs it holds now).
The historical exceptions are listed once, dated, with their reason (``claim_rules.AFTER_DATA``);
an exception that is no longer needed fails too."""

from __future__ import annotations

import ast
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

import pytest

from sandbox.analysis.figure_data import _open
from simulations import claim_rules

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "simulations" / "claim_rules.py"
#: where a rule's text may have lived before (it moved into claim_rules.py from the notebooks)
SOURCES = ("simulations", "notebooks", "sandbox")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module", autouse=True)
def full_history():
    try:
        shallow = _git("rev-parse", "--is-shallow-repository").strip()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the rules' history cannot be read")
    if shallow == "true":
        pytest.skip("a shallow clone: the rules' history is incomplete")


@cache
def first_commit(text: str) -> float:
    """When ``text`` first appeared in the sources (now, if it is not committed yet)."""
    out = _git("log", "--reverse", "--format=%ct", "-S", text, "--", *SOURCES).split()
    return float(out[0]) if out else time.time()


def _jobs_at(commit: str, path: str) -> set[str]:
    blob = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.NamedTemporaryFile(suffix=".parquet") as f:
        f.write(blob)
        f.flush()
        try:
            return set(_open(f.name)[1])
        except ValueError:
            return set()


@cache
def first_data(figure: str) -> float | None:
    """The first commit holding a result (a job id) of the figure's committed data file."""
    path = f"paper_figures/data/{figure}.parquet"
    if not (ROOT / path).is_file():
        return None
    current = set(_open(ROOT / path)[1])
    for line in _git("log", "--reverse", "--format=%h %ct", "--", path).splitlines():
        commit, when = line.split()
        if _jobs_at(commit, path) & current:
            return float(when)
    return None


def _rules() -> dict[str, tuple[float, tuple[str, ...]]]:
    """Each rule → (when its definition was complete: the latest first commit of its lines, the figures it judges)."""
    source = RULES.read_text()
    out = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        name = getattr(target, "id", "")
        if not name.lstrip("_").isupper() or name in ("AFTER_DATA", "JUDGES", "_RULES_MODULE") or name == "__all__":
            continue
        value = getattr(claim_rules, name)
        lines = [line.strip() for line in ast.get_source_segment(source, node).splitlines()]
        lines = [line for line in lines if len(line) >= 12 and not line.startswith("#")]
        when = max(first_commit(line) for line in lines)
        keys = value.keys() if isinstance(value, dict) else ()
        figures = {k[0] if isinstance(k, tuple) else k for k in keys} | set(claim_rules.JUDGES.get(name, ()))
        out[name] = (when, tuple(sorted(figures)))
    return out


def _after_data() -> dict[str, list[str]]:
    late = {}
    for name, (when, figures) in _rules().items():
        seen = [f for f in figures if first_data(f) is not None and first_data(f) < when]
        if seen:
            late[name] = seen
    return late


def test_every_rule_judges_at_least_one_figure():
    assert all(figures for _, figures in _rules().values()), {n: f for n, (_, f) in _rules().items() if not f}


def test_no_rule_was_committed_after_the_data_it_judges():
    late = {name: figures for name, figures in _after_data().items() if name not in claim_rules.AFTER_DATA}
    assert late == {}, ("rules first committed after per-seed results of the figures they judge (declare a rule "
                        f"before its data, or rerun the data after it): {late}")


def test_the_historical_exceptions_are_listed_once_dated_and_still_needed():
    late = _after_data()
    stale = sorted(set(claim_rules.AFTER_DATA) - set(late))
    assert stale == [], f"exceptions no longer needed (the rule now predates its data): {stale}"
    for name, (when, why) in claim_rules.AFTER_DATA.items():
        assert when[:4].isdigit() and len(why) > 40, (name, when, why)
