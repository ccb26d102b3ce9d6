"""docs/predictions.md shows the case file as it is (simulations/cases/report.py)."""

import re
from pathlib import Path

from simulations.cases.report import cases_table, changes_table, out_of_scope_table, round_two_table

DOC = (Path(__file__).resolve().parents[1] / "docs" / "predictions.md").read_text()


def _block(name: str) -> str:
    return re.search(rf"<!-- cases:{name} -->\n(.*?)\n<!-- /cases:{name} -->", DOC, re.S).group(1)


def test_the_page_shows_every_case_and_every_out_of_scope_mechanism_of_the_file():
    assert _block("table") == cases_table()
    assert _block("out-of-scope") == out_of_scope_table()


def test_the_page_shows_the_second_amendment_as_the_file_declares_it():
    assert _block("changes") == changes_table()
    assert _block("round2") == round_two_table()
