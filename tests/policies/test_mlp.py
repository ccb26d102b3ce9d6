"""The population MLP: the batched forward/backward equals S separate ``nn.Linear`` models; the
init is nn.Linear's; the closed-form per-sample gradient norms equal torch.func's."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from sandbox.advantages import per_sample_grad_sq_norms
from sandbox.policies.mlp import MLP


def _reference(params, s: int) -> nn.Sequential:
    """Member ``s`` as a plain torch model with the same weights (nn.Linear stores [out, in])."""
    W1, b1, W2, b2 = (p[s].detach() for p in params)
    model = nn.Sequential(nn.Linear(W1.shape[0], W1.shape[1]), nn.ReLU(), nn.Linear(W2.shape[0], W2.shape[1]))
    with torch.no_grad():
        model[0].weight.copy_(W1.T)
        model[0].bias.copy_(b1)
        model[2].weight.copy_(W2.T)
        model[2].bias.copy_(b2)
    return model.double()


def test_population_forward_and_backward_equal_separate_linear_models():
    mlp, S, n = MLP(d_in=12, hidden=7, n_out=5), 3, 6
    params = [p.double().requires_grad_(True) for p in mlp.init(S, torch.Generator().manual_seed(0))]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(S, n, 12, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (S, n), generator=g)
    weights = torch.randn(S, n, 5, generator=g, dtype=torch.float64)
    logits = mlp.logits(params, x)
    (logits * weights).sum().backward()
    for s in range(S):
        ref = _reference(params, s)
        out = ref(x[s])
        torch.testing.assert_close(logits[s], out, rtol=0, atol=1e-12)
        (out * weights[s]).sum().backward()
        torch.testing.assert_close(params[0].grad[s], ref[0].weight.grad.T, rtol=0, atol=1e-12)
        torch.testing.assert_close(params[1].grad[s], ref[0].bias.grad, rtol=0, atol=1e-12)
        torch.testing.assert_close(params[2].grad[s], ref[2].weight.grad.T, rtol=0, atol=1e-12)
        torch.testing.assert_close(params[3].grad[s], ref[2].bias.grad, rtol=0, atol=1e-12)
    # cross-entropy gradients as well (the xent oracle's path)
    for p in params:
        p.grad = None
    torch.log_softmax(mlp.logits(params, x), -1).gather(-1, y.unsqueeze(-1)).sum().backward()
    ref = _reference(params, 1)
    torch.log_softmax(ref(x[1]), -1).gather(-1, y[1].unsqueeze(-1)).sum().backward()
    torch.testing.assert_close(params[0].grad[1], ref[0].weight.grad.T, rtol=0, atol=1e-12)


def test_shared_inputs_equal_per_member_inputs():
    mlp = MLP(d_in=8, hidden=4, n_out=3)
    params = mlp.init(2, torch.Generator().manual_seed(0))
    x = torch.rand(5, 8, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(mlp.logits(params, x), mlp.logits(params, x.expand(2, 5, 8).contiguous()))


def test_init_is_nn_linear_default_and_deterministic():
    mlp = MLP()
    a = mlp.init(2, torch.Generator().manual_seed(0))
    b = mlp.init(2, torch.Generator().manual_seed(0))
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert [tuple(p.shape) for p in a] == [(2, 784, 100), (2, 100), (2, 100, 10), (2, 10)]
    assert sum(p[0].numel() for p in a) == mlp.n_params == 79510
    assert not torch.equal(a[0][0], a[0][1]), "members must get independent weights"
    for p, fan_in in zip(a, (784, 784, 100, 100)):
        bound = 1 / math.sqrt(fan_in)
        assert float(p.abs().max()) <= bound
        # U(−b, b): mean 0, variance b²/3 (the default nn.Linear init, kaiming_uniform with a = √5),
        # within 5 standard errors
        n = p.numel()
        assert abs(float(p.mean())) < 5 * bound / math.sqrt(3 * n)
        assert abs(float(p.var()) - bound**2 / 3) < 5 * bound**2 * math.sqrt(4 / 45 / n)
    ref = nn.Linear(784, 100).weight.detach()
    assert float(ref.abs().max()) <= 1 / math.sqrt(784)
    assert float(ref.var()) == pytest.approx(float(a[0].var()), rel=0.05)


def test_closed_form_grad_norms_equal_torch_func():
    mlp, S, n = MLP(d_in=10, hidden=6, n_out=4), 2, 7
    params = [p.double() for p in mlp.init(S, torch.Generator().manual_seed(3))]
    g = torch.Generator().manual_seed(4)
    x = torch.randn(S, n, 10, generator=g, dtype=torch.float64)
    a = torch.randint(0, 4, (S, n), generator=g)
    got = mlp.grad_sq_norms(params, x, a)
    for s in range(S):
        model = _reference(params, s)

        def logp(call, xi, ai):
            return torch.log_softmax(call(xi), -1).gather(-1, ai.unsqueeze(-1)).sum()

        want = per_sample_grad_sq_norms(model, logp, x[s], a[s])
        torch.testing.assert_close(got[s], want, rtol=1e-10, atol=1e-12)


def test_bad_shapes_raise():
    mlp = MLP(d_in=8, hidden=4, n_out=3)
    params = mlp.init(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="d_in=8"):
        mlp.logits(params, torch.zeros(2, 3, 9))
    with pytest.raises(ValueError, match="W1 must have shape"):
        MLP(d_in=9, hidden=4, n_out=3).logits(params, torch.zeros(2, 3, 9))
    with pytest.raises(ValueError, match="hidden"):
        MLP(hidden=0)
