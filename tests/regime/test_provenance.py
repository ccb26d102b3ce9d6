"""Every committed regime trajectory (arms, curves, pilots, earlier rounds) names the clean commit that
made it: ``regime_runs.run`` stamps the tree it ran from, ``-dirty`` when tracked files differed."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sandbox.analysis.provenance import is_dirty

DATA = Path(__file__).resolve().parents[2] / "simulations" / "data" / "regime"
#: the one historical exception: the first round, made (2026-11-28, first committed at b1a6272) before
#: runs stamped their commit (3dc0e91); kept as the record of that round, out of every table
UNSTAMPED = {"round1"}
FILES = sorted(DATA.rglob("*.parquet"))


def test_the_regime_data_are_found():
    assert len(FILES) > 100 and {p.parent.name for p in FILES} >= {"regime", "curves", "pilot", "round1", "round2"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_a_regime_data_file_was_made_from_a_clean_tree(path):
    if path.parent.name in UNSTAMPED:
        assert "commit" not in pq.read_schema(path).names, f"{path.name}: stamped now: drop it from UNSTAMPED"
        return
    stamps = set(pq.read_table(path, columns=["commit"]).column("commit").to_pylist())
    assert len(stamps) == 1, f"{path.name}: made by {sorted(stamps)}"
    (stamp,) = stamps
    assert stamp and stamp != "unknown" and not is_dirty(stamp), f"{path.name}: made at {stamp!r}"
