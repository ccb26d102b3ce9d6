"""docs/regime.md's table is the one the committed regime data give (generated, never kept by hand)."""

import re
from pathlib import Path

from simulations.regime_runs import load
from simulations.regime_table import table

DOC = Path(__file__).resolve().parents[2] / "docs" / "regime.md"


def test_the_docs_table_is_generated_from_the_committed_data():
    text = DOC.read_text()
    block = re.search(r"<!-- regime-table:[^>]*-->\n(.*?)\n<!-- /regime-table -->", text, re.S)
    assert block, "docs/regime.md lost its generated table markers"
    assert block.group(1).strip() == table(load()).strip(), \
        "docs/regime.md's table is stale: paste `python -m simulations.regime_runs table`"
