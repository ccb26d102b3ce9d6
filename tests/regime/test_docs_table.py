"""docs/regime.md's tables are the ones the committed regime data give (generated, never kept by hand)."""

from pathlib import Path

import pytest

from simulations.regime_runs import doc_blocks
from simulations.regime_table import DOC_MARKERS, doc_block, refresh_docs

DOC = Path(__file__).resolve().parents[2] / "docs" / "regime.md"


@pytest.mark.parametrize("marker", DOC_MARKERS)
def test_the_docs_blocks_are_generated_from_the_committed_data(marker):
    block = doc_block(DOC.read_text(), marker)
    assert block is not None, f"docs/regime.md lost its generated {marker} markers"
    assert block.strip() == doc_blocks()[marker].strip(), \
        f"docs/regime.md's {marker} block is stale: run `python -m simulations.regime_runs docs`"


def test_refresh_rewrites_each_block_and_refuses_a_page_without_its_markers():
    page = "a\n<!-- regime-table: generated -->\nold\n<!-- /regime-table -->\nb\n"
    assert refresh_docs(page, {"regime-table": "new"}) == "a\n<!-- regime-table: generated -->\nnew\n<!-- /regime-table -->\nb\n"
    with pytest.raises(ValueError, match="'regime-pilots' once"):
        refresh_docs(page, {"regime-pilots": "x"})
