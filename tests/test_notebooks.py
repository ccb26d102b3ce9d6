"""Every figure end to end at quick fidelity: sweep, notebook (nbclient), PNG + PDF, claims."""

from __future__ import annotations

import pytest

from sandbox.reproduce import reproduce
from simulations import select

#: figures that start Ray run in the same xdist worker as the Ray tests (one Ray at a time)
FIGURES = [pytest.param(f.name, marks=pytest.mark.xdist_group("ray")) if f.group == "llm" else f.name
           for f in select()]


@pytest.mark.parametrize("name", FIGURES)
def test_figure_reproduces_and_its_claims_pass(name, tmp_path):
    if name.startswith("mnist"):
        from sandbox.envs.mnist import find_test_split

        if find_test_split() is None:
            pytest.skip("the MNIST test split was not found: put t10k-images-idx3-ubyte.gz and "
                        "t10k-labels-idx1-ubyte.gz in ../shared/data/mnist or set SANDBOX_MNIST_DIR")
    (outcome,) = reproduce([name], fidelity="quick", results_dir=tmp_path / "results",
                           figures_dir=tmp_path / "figures", notebooks_dir=tmp_path / "notebooks", workers=1,
                           progress=False)
    assert outcome.error is None, outcome.error
    assert outcome.claims, "the notebook recorded no claims"
    failed = [f"{c.name}: {c.interval}" for c in outcome.claims if c.passed is False]
    assert not failed, failed
    assert {p.suffix for p in outcome.files} == {".png", ".pdf"}
    assert (tmp_path / "notebooks").glob("*.ipynb")
