"""Population optimisers against torch.optim, per member; inactive members are untouched."""

from __future__ import annotations

import pytest
import torch

from sandbox.runtime.optim import PopulationOptimizer


def _trajectory(name, lr, S=3, steps=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(S, 4, 3, generator=g, dtype=torch.float64), torch.randn(S, 2, generator=g, dtype=torch.float64)]
    grads = [[torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params] for _ in range(steps)]
    return params, grads


@pytest.mark.parametrize("name, torch_cls, kwargs", [("sgd", torch.optim.SGD, {}), ("adam", torch.optim.Adam, {})])
def test_matches_torch_optim_per_member(name, torch_cls, kwargs):
    params, grads = _trajectory(name, 0.1)
    ours = [p.clone() for p in params]
    opt = PopulationOptimizer(name, lr=0.1)
    for step_grads in grads:
        opt.step(ours, step_grads, (3,))
    for s in range(3):
        ref = [p[s].clone().requires_grad_(True) for p in params]
        topt = torch_cls(ref, lr=0.1, **kwargs)
        for step_grads in grads:
            for r, gr in zip(ref, step_grads):
                r.grad = gr[s].clone()
            topt.step()
        for r, o in zip(ref, ours):
            assert torch.allclose(r.detach(), o[s], rtol=1e-12, atol=1e-14)


def test_normalized_step_has_length_lr_per_member():
    params, grads = _trajectory("normalized", 0.3)
    before = [p.clone() for p in params]
    PopulationOptimizer("normalized", lr=0.3).step(params, grads[0], (3,))
    moved = torch.cat([(p - b).reshape(3, -1) for p, b in zip(params, before)], -1).norm(dim=-1)
    assert torch.allclose(moved, torch.full((3,), 0.3, dtype=torch.float64))


@pytest.mark.parametrize("name", ["sgd", "adam", "normalized"])
def test_inactive_members_and_lr_scale(name):
    params, grads = _trajectory(name, 0.1)
    before = [p.clone() for p in params]
    opt = PopulationOptimizer(name, lr=0.1)
    active = torch.tensor([True, False, True])
    for step_grads in grads:
        opt.step(params, step_grads, (3,), lr_scale=torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64), active=active)
    for p, b in zip(params, before):
        assert torch.equal(p[1], b[1])  # inactive: untouched
        assert torch.equal(p[2], b[2])  # lr_scale 0: no move
        assert not torch.equal(p[0], b[0])
    if name == "adam":  # the inactive member's moments and step count did not advance
        assert opt._t.tolist() == [5, 0, 5]
        assert torch.equal(opt._state[0][0][1], torch.zeros_like(opt._state[0][0][1]))


def test_bad_optimizer_arguments():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        PopulationOptimizer("rmsprop")
    with pytest.raises(ValueError, match=r"lr must lie in \(0.0, inf\]"):
        PopulationOptimizer("sgd", lr=0.0)
