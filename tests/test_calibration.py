"""The calibration table of docs/predictions.md is this code's output, and meets the published
levels (simulations/cases/calibration.py, sandbox/frictions/measured.py)."""

import re
from pathlib import Path

import pytest

from sandbox.frictions.measured import PUBLISHED
from simulations.cases.calibration import published_table, uniform_rows

DOC = (Path(__file__).resolve().parents[1] / "docs" / "predictions.md").read_text()


def _documented(precision: str, vocab: int, length: int) -> list[str]:
    table = re.search(r"<!-- calibration:uniform -->\n(.*?)<!-- /calibration:uniform -->", DOC, re.S).group(1)
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith(precision) and cells[1:3] == [str(vocab), str(length)]:
            return cells
    raise AssertionError(f"no documented row {precision} V={vocab} T={length}")


def test_published_levels_are_the_frictions_and_the_docs_show_them():
    assert published_table() in DOC
    assert PUBLISHED["bf16"] == 1e-3 and PUBLISHED["fp16"] == 1e-5


def test_a_documented_row_is_reproduced_and_meets_the_published_bf16_levels():
    s = uniform_rows(PUBLISHED["bf16"], 2, 1024)
    cells = _documented("bf16", 2, 1024)
    assert cells[3] == f"{s['token_kl_k1']:.3g}" and cells[5] == f"{s['outside_band']:.2%}"
    assert cells[7] == f"{s['drift_per_1k']:+.3g}".lstrip("+")
    assert s["token_kl_k3"] == pytest.approx(1e-3, rel=0.05)  # the published token KL at the start
    assert s["drift_per_1k"] == pytest.approx(-1.01, rel=0.15)  # Precision-RL Fig. 5's slope
    assert 0.01 < s["outside_band"] < 0.05  # "a few percent" (the figure, unverified)


def test_fp16_sits_two_orders_of_magnitude_below():
    s = uniform_rows(PUBLISHED["fp16"], 2, 256, rows=100)
    assert s["token_kl_k3"] == pytest.approx(1e-5, rel=0.05) and s["outside_band"] == 0.0
