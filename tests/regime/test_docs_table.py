"""docs/regime.md's table is the one the committed regime data give (generated, never kept by hand)."""

import re
from pathlib import Path

from simulations.regime_runs import ARMS, load, pilots
from simulations.regime_table import controls, pilot_table, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "regime.md"


def test_the_docs_table_is_generated_from_the_committed_data():
    text = DOC.read_text()
    block = re.search(r"<!-- regime-table:[^>]*-->\n(.*?)\n<!-- /regime-table -->", text, re.S)
    assert block, "docs/regime.md lost its generated table markers"
    assert block.group(1).strip() == table(load()).strip(), \
        "docs/regime.md's table is stale: paste `python -m simulations.regime_runs table`"


def test_the_docs_controls_are_generated_from_the_committed_data():
    text = DOC.read_text()
    block = re.search(r"<!-- regime-controls:[^>]*-->\n(.*?)\n<!-- /regime-controls -->", text, re.S)
    assert block, "docs/regime.md lost its generated controls markers"
    want = controls(load(), {name: arm.role for name, arm in ARMS.items()})
    assert block.group(1).strip() == want.strip(), \
        "docs/regime.md's controls are stale: paste the second block of `python -m simulations.regime_runs table`"


def test_the_docs_pilots_are_generated_from_the_committed_pilots():
    text = DOC.read_text()
    block = re.search(r"<!-- regime-pilots:[^>]*-->\n(.*?)\n<!-- /regime-pilots -->", text, re.S)
    assert block, "docs/regime.md lost its generated pilots markers"
    assert block.group(1).strip() == pilot_table(pilots()).strip(), \
        "docs/regime.md's pilots are stale: paste `python -m simulations.regime_runs pilots`"
