"""Every golden case (tests/golden/cases.py) gives the frozen numbers bit for bit."""

import pytest
import torch

from tests.golden.cases import DATA, cases, record

pytestmark = pytest.mark.usefixtures("one_thread")
CASES = cases()


#: logged signals added after the numbers were frozen (issue 32: sandbox.diagnostics.SIGNALS); a
#: step's metrics may hold them besides the frozen keys, every frozen number stays bit for bit
ADDED_SIGNALS = {"log_ratio_abs_mean", "log_ratio_abs_max", "entropy"}


def assert_same(got, want, where: str) -> None:
    if isinstance(want, dict):
        extra = set(got) - set(want)
        allowed = ADDED_SIGNALS if ".metrics[" in where else set()
        assert set(want) <= set(got) and extra <= allowed, f"{where}: keys {sorted(got)} != {sorted(want)}"
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
