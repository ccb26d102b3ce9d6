"""ESS-scaled step, GAC projection/skip, gradient clipping."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import PGTerms
from sandbox.controllers import CONTROLLERS, make_controller
from sandbox.diagnostics import cosine


def _terms(log_rho, T=1):
    logp = torch.full((*log_rho.shape, T), -30.0, dtype=torch.float64)  # log π ≤ 0, and so is log μ = log π − log ρ
    mu = logp.clone()
    mu[..., 0] = logp[..., 0] - log_rho
    return PGTerms(logp=logp, advantages=torch.zeros(log_rho.shape, dtype=torch.float64), behavior_logp=mu)


def test_ess_step_equal_ratios_full_step():
    g = [torch.ones(3, dtype=torch.float64)]
    out = make_controller("ess_lr").step(g, _terms(torch.full((5,), 0.7, dtype=torch.float64)))
    assert out.metrics["ess_frac"].item() == pytest.approx(1.0)
    assert out.lr_scale.item() == pytest.approx(1.0)
    assert torch.equal(out.grads[0], g[0])


def test_ess_step_hand_computed():
    # ρ = (1, 3): ESS/B = 0.8 → scale sqrt(0.8)
    out = make_controller("ess_lr").step([torch.ones(2, dtype=torch.float64)], _terms(torch.log(torch.tensor([1.0, 3.0], dtype=torch.float64))))
    assert out.lr_scale.item() == pytest.approx(math.sqrt(0.8))
    assert torch.equal(out.grads[0], torch.ones(2, dtype=torch.float64))  # the step is scaled, not the gradient


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=20))
def test_ess_step_scale_in_unit_interval(log_rho):
    out = make_controller("ess_lr").step([torch.ones(4, dtype=torch.float64)], _terms(torch.tensor(log_rho, dtype=torch.float64)))
    scale = out.lr_scale.item()
    assert 0.0 <= scale <= 1.0


def test_ess_step_per_population_member():
    log_rho = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], dtype=torch.float64)
    grads = [torch.ones(2, 4, dtype=torch.float64)]
    out = make_controller("ess_lr").step(grads, _terms(log_rho))
    assert torch.allclose(out.lr_scale, torch.tensor([1.0, math.sqrt(0.8)], dtype=torch.float64))


def test_gac_remembers_the_raw_gradient_by_default():
    """memory='raw': the decision uses cos(g_t, g_{t−1}) of raw gradients, whatever was applied."""
    gac = make_controller("gac", c_proj=0.3, c_skip=0.9)
    assert gac.memory == "raw"
    gac.step([torch.tensor([1.0, 0.0])])
    out = gac.step([torch.tensor([1.0, 1.0])])  # cos 0.707: the component along (1, 0) is removed
    assert torch.allclose(out.grads[0], torch.tensor([0.0, 1.0]))
    # the remembered direction is the raw (1, 1), not the applied (0, 1):
    # cos((0.1, 1), (1, 1)) = 1.1/√2.02 ≈ 0.774 → project along (1, 1): (0.1, 1) − 0.55·(1, 1)
    out = gac.step([torch.tensor([0.1, 1.0])])
    assert out.metrics["grad_cos_prev"].item() == pytest.approx(1.1 / math.sqrt(2.02))
    assert out.metrics["grad_cos_prev_raw"].item() == pytest.approx(1.1 / math.sqrt(2.02))
    assert out.metrics["grad_cos_prev_applied"].item() == pytest.approx(1.0 / math.sqrt(1.01))  # vs (0, 1)
    assert torch.allclose(out.grads[0], torch.tensor([-0.45, 0.45]))
    assert not out.skip.item() and out.metrics["gac_projected"].item() == 1.0
    # the same gradient again: raw cosine 1 > 0.9, skipped; the applied memory keeps (−0.45, 0.45)
    out = gac.step([torch.tensor([0.1, 1.0])])
    assert out.skip.item() and torch.equal(out.grads[0], torch.zeros(2))
    assert torch.allclose(gac.applied, torch.tensor([-0.45, 0.45]))
    assert torch.allclose(gac.previous, torch.tensor([0.1, 1.0]))


def test_gac_projects_above_threshold_and_skips_above_skip():
    gac = make_controller("gac", c_proj=0.3, c_skip=0.9, memory="applied")
    first = gac.step([torch.tensor([1.0, 0.0])])
    assert not first.skip.item() and first.metrics["grad_cos_prev"].item() == 0.0
    # cos = 1/sqrt(2) ≈ 0.707 ∈ (0.3, 0.9]: the component along (1, 0) is removed
    out = gac.step([torch.tensor([1.0, 1.0])])
    assert out.metrics["grad_cos_prev"].item() == pytest.approx(1 / math.sqrt(2))
    assert torch.allclose(out.grads[0], torch.tensor([0.0, 1.0]))
    assert out.metrics["gac_projected"].item() == 1.0 and not out.skip.item()
    # previous is now (0, 1); cos((0.1, 1), (0, 1)) ≈ 0.995 > 0.9: skip, gradient zeroed
    out = gac.step([torch.tensor([0.1, 1.0])])
    assert out.metrics["grad_cos_prev_raw"].item() == pytest.approx(1.1 / math.sqrt(2.02))  # logged, not used
    assert out.skip.item() and torch.equal(out.grads[0], torch.zeros(2))
    # a skipped step leaves the stored direction unchanged; an orthogonal gradient passes through
    out = gac.step([torch.tensor([2.0, 0.0])])
    assert out.metrics["grad_cos_prev"].item() == pytest.approx(0.0)
    assert torch.allclose(out.grads[0], torch.tensor([2.0, 0.0]))


def test_gac_partial_strength_and_below_threshold():
    gac = make_controller("gac", c_proj=0.5, strength=0.5)
    gac.step([torch.tensor([1.0, 0.0])])
    below = gac.step([torch.tensor([1.0, 2.0])])  # cos ≈ 0.447 < 0.5: unchanged
    assert torch.allclose(below.grads[0], torch.tensor([1.0, 2.0]))
    gac.reset()
    gac.step([torch.tensor([1.0, 0.0])])
    out = gac.step([torch.tensor([1.0, 1.0])])  # cos 0.707: remove half of the parallel part
    assert torch.allclose(out.grads[0], torch.tensor([0.5, 1.0]))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), memory=st.sampled_from(["raw", "applied"]))
def test_gac_output_cosine_with_previous_is_small_after_projection(seed, memory):
    g = torch.Generator().manual_seed(seed)
    gac = make_controller("gac", c_proj=-1.0, c_skip=1.0, memory=memory)  # always project, never skip
    prev = torch.randn(2, 7, dtype=torch.float64, generator=g)
    gac.step([prev], population_shape=(2,))
    cur = torch.randn(2, 7, dtype=torch.float64, generator=g)
    out = gac.step([cur], population_shape=(2,))
    assert torch.allclose(cosine(out.grads[0], prev), torch.zeros(2, dtype=torch.float64), atol=1e-10)


def test_gac_multiple_tensors_and_population():
    gac = make_controller("gac")
    gac.step([torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.zeros(2, 1)], population_shape=(2,))
    out = gac.step([torch.tensor([[1.0, 1.0], [1.0, 0.0]]), torch.zeros(2, 1)], population_shape=(2,))
    # member 0 projected (cos 0.707), member 1 orthogonal (cos 0)
    assert torch.allclose(out.grads[0], torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    assert out.metrics["gac_projected"].tolist() == [1.0, 0.0]


def test_clip_grad_norm():
    out = make_controller("clip_grad_norm", max_norm=1.0).step([torch.tensor([3.0]), torch.tensor([4.0])])
    assert torch.allclose(torch.cat(out.grads), torch.tensor([0.6, 0.8]))
    small = make_controller("clip_grad_norm", max_norm=10.0).step([torch.tensor([3.0, 4.0])])
    assert torch.allclose(small.grads[0], torch.tensor([3.0, 4.0]))
    assert out.lr_scale.item() == 1.0


def _stepped_gac():
    gac = make_controller("gac")
    gac.step([torch.ones(2)])
    return gac


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: make_controller("gac", c_proj=2.0), r"c_proj must lie in \[-1.0, 1.0\]"),
        (lambda: make_controller("gac", c_proj=0.5, c_skip=0.4), r"c_skip must lie in \[0.5, 1.0\]"),
        (lambda: make_controller("gac", strength=1.5), r"strength must lie in \[0.0, 1.0\]"),
        (lambda: make_controller("gac", memory="update"), r"memory must be one of \['raw', 'applied'\]"),
        (lambda: make_controller("clip_grad_norm", max_norm=0.0), r"max_norm must lie in \(0.0, inf\]"),
        (lambda: make_controller("adam"), "unknown controller 'adam'"),
        (lambda: make_controller("ess_lr").step([torch.ones(2)]), "ess_lr needs terms"),
        (lambda: make_controller("none").step([torch.tensor([float("nan")])]), "grads contain NaN"),
        (lambda: make_controller("none").step([]), "grads must hold at least one"),
        (lambda: _stepped_gac().step([torch.ones(3)]), "grads changed shape"),
        (lambda: make_controller("none").step([torch.ones(3)], population_shape=(2,)), "must start with the population shape"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_registry():
    assert {"ess_lr", "gac", "clip_grad_norm"} <= set(CONTROLLERS.names())
