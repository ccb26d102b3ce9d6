"""The golden tolerance (tests/golden/tolerance.py) still sees a change of numbers: beyond float32
rounding on the first step or on the freezing capability, a moved integer, parameters beyond
Adam's step bound."""

import copy

import pytest
import torch

from tests.golden.cases import DATA, cases, record
from tests.golden.tolerance import RTOL, adam_bound, adam_ratio_bound, compare

pytestmark = pytest.mark.usefixtures("one_thread")
NAME = "reverse_copy-none"


@pytest.fixture(scope="module")
def frozen():
    return torch.load(DATA / f"{NAME}.pt", weights_only=False)


def _edited(frozen, edit):
    got = copy.deepcopy(frozen)
    edit(got)
    return got


@pytest.mark.parametrize("same", [True, False])
def test_a_change_of_the_first_step_beyond_rounding_fails_on_any_capability(frozen, same):
    compare(frozen, frozen, NAME, 1e-2, 4, same)
    nudged = _edited(frozen, lambda r: r["rollouts"][0]["behavior_logp"].mul_(1 + 1e-3))
    with pytest.raises(AssertionError, match=r"rollouts\[0\]\.behavior_logp: max \|Δ\|"):
        compare(nudged, frozen, NAME, 1e-2, 4, same)
    within = _edited(frozen, lambda r: r["metrics"][0]["surprisal_mean"].add_(RTOL / 4))
    compare(within, frozen, NAME, 1e-2, 4, same)


@pytest.mark.parametrize("same", [True, False])
def test_a_moved_action_fails_on_any_capability(frozen, same):
    moved = _edited(frozen, lambda r: r["rollouts"][3]["actions"].view(-1)[0].add_(1))
    with pytest.raises(AssertionError, match=r"rollouts\[3\]\.actions: differs"):
        compare(moved, frozen, NAME, 1e-2, 4, same)


def test_later_floats_are_held_to_rounding_on_the_freezing_capability_and_parameters_to_adams_bound_elsewhere(frozen):
    later = _edited(frozen, lambda r: r["metrics"][3]["surprisal_mean"].mul_(1 + 1e-3))
    with pytest.raises(AssertionError, match=r"metrics\[3\]\.surprisal_mean"):
        compare(later, frozen, NAME, 1e-2, 4, same=True)
    compare(later, frozen, NAME, 1e-2, 4, same=False)  # Adam's amplification: no rounding tolerance holds
    bound = adam_bound(1e-2, 4)
    near = _edited(frozen, lambda r: r["params"][8].add_(bound / 2))
    compare(near, frozen, NAME, 1e-2, 4, same=False)
    far = _edited(frozen, lambda r: r["params"][8].add_(2 * bound))
    with pytest.raises(AssertionError, match=r"params\[8\]: .* beyond Adam's bound"):
        compare(far, frozen, NAME, 1e-2, 4, same=False)


def test_adams_ratio_bound_is_tight_and_never_exceeded():
    b1, b2 = 0.9, 0.999
    assert adam_ratio_bound(1) == pytest.approx(1.0)
    g = torch.Generator().manual_seed(0)
    for t in (1, 2, 4, 10):
        a = torch.tensor([(1 - b1) * b1 ** (t - i) / (1 - b1**t) for i in range(1, t + 1)], dtype=torch.float64)
        b = torch.tensor([(1 - b2) * b2 ** (t - i) / (1 - b2**t) for i in range(1, t + 1)], dtype=torch.float64)
        grads = torch.randn(10_000, t, generator=g, dtype=torch.float64)
        ratio = (grads @ a).abs() / (grads.pow(2) @ b).sqrt()
        assert float(ratio.max()) <= adam_ratio_bound(t) * (1 + 1e-12)
        best = a / b  # the gradient sequence that attains it
        assert float((best @ a).abs() / (best.pow(2) @ b).sqrt()) == pytest.approx(adam_ratio_bound(t))


def test_the_case_the_tolerance_is_tested_on_is_a_golden_case():
    assert NAME in cases() and record  # (record is what the golden test compares)
