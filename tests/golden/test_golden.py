"""Every golden case (tests/golden/cases.py) gives the frozen numbers bit for bit."""

import pytest
import torch

from tests.golden.cases import DATA, cases, record

pytestmark = pytest.mark.usefixtures("one_thread")
CASES = cases()


def assert_same(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got.dtype == want.dtype and got.shape == want.shape, f"{where}: {got.dtype}{tuple(got.shape)}"
        assert torch.equal(torch.nan_to_num(got, nan=7.0), torch.nan_to_num(want, nan=7.0)) if got.is_floating_point() \
            else torch.equal(got, want), f"{where}: differs (max |Δ| {(got.double() - want.double()).abs().max()})"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    want = torch.load(DATA / f"{name}.pt", weights_only=False)
    assert_same(record(CASES[name]), want, name)
