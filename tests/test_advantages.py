"""Baselines: hand values, group handling, population axis, the min-variance baseline's weights."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.advantages import ADVANTAGES, make_advantage, per_sample_grad_sq_norms

R = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
G = torch.tensor([0, 0, 0, 1, 1])


def test_group_mean_hand_computed():
    # group 0 mean 1/3, group 1 mean 1
    assert torch.allclose(make_advantage("group_mean")(R, G), torch.tensor([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0]))


def test_grpo_hand_computed():
    # group 0: centred (2/3, −1/3, −1/3), unbiased var = (4/9 + 1/9 + 1/9)/2 = 1/3
    std = (1 / 3) ** 0.5
    expected = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0]) / torch.tensor([std + 1e-6] * 3 + [1e-6] * 2)
    assert torch.allclose(make_advantage("grpo")(R, G), expected, atol=1e-6)


def test_rloo_hand_computed():
    # group 0: 1 − 0 = 1, 0 − ½ = −½, 0 − ½ = −½; group 1: 1 − 1 = 0
    assert torch.allclose(make_advantage("rloo")(R, G), torch.tensor([1.0, -0.5, -0.5, 0.0, 0.0]))


def test_rloo_is_rescaled_group_mean():
    r = torch.randn(12, generator=torch.Generator().manual_seed(0))
    g = torch.arange(12) // 4
    assert torch.allclose(make_advantage("rloo")(r, g), make_advantage("group_mean")(r, g) * 4 / 3, atol=1e-6)


def test_dr_grpo_equals_group_mean():
    assert torch.equal(make_advantage("dr_grpo")(R, G), make_advantage("group_mean")(R, G))
    # one implementation under two names, each keeping its own name (error messages, job keys)
    assert ADVANTAGES.get("dr_grpo").compute is ADVANTAGES.get("group_mean").compute
    assert (make_advantage("dr_grpo").name, make_advantage("group_mean").name) == ("dr_grpo", "group_mean")


def test_singleton_groups_get_zero():
    r = torch.tensor([3.0, 1.0])
    g = torch.tensor([0, 1])
    for name in ["group_mean", "grpo", "rloo", "dr_grpo"]:
        assert torch.equal(make_advantage(name)(r, g), torch.zeros(2)), name


def test_confidence_baseline():
    probs = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    assert torch.allclose(make_advantage("confidence")(torch.tensor([1.0, 1.0]), probs=probs), torch.tensor([0.5, 0.0]))


def test_constant_baseline():
    assert torch.equal(make_advantage("constant", b=0.5)(R), R - 0.5)


def test_min_variance_hand_computed():
    # one group; W = ρ²·n with ρ = (1, 2), n = (1, 0.5): W = (1, 2) → b* = (1·1 + 2·0)/3 = 1/3
    r = torch.tensor([1.0, 0.0])
    adv = make_advantage("min_variance")(r, rho=torch.tensor([1.0, 2.0]), grad_sq_norms=torch.tensor([1.0, 0.5]))
    assert torch.allclose(adv, r - 1 / 3)
    cheap = make_advantage("min_variance", weights="rho2")(r, rho=torch.tensor([1.0, 2.0]))
    assert torch.allclose(cheap, r - 1 / 5)  # W = (1, 4)
    on_policy = make_advantage("min_variance", weights="rho2")(r)
    assert torch.allclose(on_policy, make_advantage("group_mean")(r))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), S=st.integers(1, 3), n_groups=st.integers(1, 4), size=st.integers(2, 4))
def test_population_axis_is_independent(seed, S, n_groups, size):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(S, n_groups * size, generator=g)
    group = torch.arange(n_groups).repeat_interleave(size)
    for name in ["group_mean", "grpo", "rloo"]:
        joint = make_advantage(name)(rewards, group)
        for s in range(S):
            assert torch.allclose(joint[s], make_advantage(name)(rewards[s], group), atol=1e-6)
        assert torch.allclose(joint.view(S, n_groups, size).sum(-1), torch.zeros(S, n_groups), atol=1e-5) or name == "grpo"


def test_per_sample_grad_sq_norms_matches_loop():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 5))
    x = torch.randn(6, 3)
    a = torch.randint(0, 5, (6,))

    def seq_logp(call, xi, ai):
        return torch.log_softmax(call(xi), -1).gather(-1, ai.unsqueeze(-1)).sum()

    fast = per_sample_grad_sq_norms(model, seq_logp, x, a)
    for i in range(6):
        model.zero_grad()
        torch.log_softmax(model(x[i : i + 1]), -1)[0, a[i]].backward()
        slow = sum(p.grad.pow(2).sum() for p in model.parameters())
        assert fast[i].item() == pytest.approx(slow.item(), rel=1e-5)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: make_advantage("nope"), "unknown advantage 'nope'"),
        (lambda: make_advantage("grpo", eps=0.0), r"eps must lie in \(0.0, inf\]"),
        (lambda: make_advantage("min_variance", weights="abs"), "weights must be one of"),
        (lambda: make_advantage("group_mean")(R, torch.tensor([0, 1])), "group must have shape"),
        (lambda: make_advantage("group_mean")(R, G.float()), "group must have a int dtype"),
        (lambda: make_advantage("group_mean")(torch.tensor([1.0, float("nan")])), "rewards contains NaN"),
        (lambda: make_advantage("group_mean")(R, -G), "group ids must be non-negative"),
        (lambda: make_advantage("confidence")(R), "confidence needs probs"),
        (lambda: make_advantage("confidence")(R, probs=torch.ones(4, 2)), "probs must have shape"),
        (lambda: make_advantage("min_variance")(R), "needs grad_sq_norms"),
        (lambda: make_advantage("min_variance")(R, rho=torch.ones(3), grad_sq_norms=torch.ones(5)), r"rho must have shape"),
        (lambda: make_advantage("group_mean")(R, probz=R), r"unknown advantage input\(s\) \['probz'\]"),
        (lambda: make_advantage("maxrl")(torch.tensor([1.0, -1.0])), "rewards must be >= 0 for maxrl"),
        (lambda: make_advantage("reinforce_pp", group_baseline=1), "group_baseline must be a bool"),
        (lambda: make_advantage("reinforce_pp", eps=0.0), r"eps must lie in \(0.0, inf\]"),
        (lambda: make_advantage("reinforce_pp")(R, torch.tensor([0, 1])), "group must have shape"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_registry_lists_spec_entries():
    assert {"group_mean", "grpo", "rloo", "dr_grpo", "confidence", "constant", "min_variance"} <= set(ADVANTAGES.names())


def test_min_variance_needs_follow_its_weights():
    assert make_advantage("min_variance").needs == ("rho", "grad_sq_norms")
    assert make_advantage("min_variance", weights="rho2").needs == ("rho",)


def test_compute_advantages_calls_only_the_providers_needed():
    from sandbox.advantages import compute_advantages

    called = []

    def provider(name, value):
        def make():
            called.append(name)
            return value
        return make

    rho = torch.tensor([1.0, 2.0])
    got = compute_advantages(make_advantage("min_variance", weights="rho2"), torch.tensor([1.0, 0.0]), None, "toy",
                             rho=provider("rho", rho), probs=provider("probs", torch.ones(2, 3)))
    assert called == ["rho"]  # probs was not needed, so never computed
    assert torch.allclose(got, torch.tensor([1.0, 0.0]) - 1 / 5)  # W = ρ² = (1, 4): b* = 1/5
    plain = compute_advantages(make_advantage("group_mean"), R, G, "toy")
    assert torch.equal(plain, make_advantage("group_mean")(R, G))
    with pytest.raises(ValueError, match=r"needs 'grad_sq_norms', which task 'toy' cannot provide .*weights='rho2'"):
        compute_advantages(make_advantage("min_variance"), R, G, "toy", rho=lambda: torch.ones(5))
    with pytest.raises(ValueError, match=r"needs 'probs', which task 'toy' cannot provide \(it provides nothing\)"):
        compute_advantages(make_advantage("confidence"), R, G, "toy")


# ----------------------------------------------------------------------------- MaxRL, REINFORCE++
def test_maxrl_hand_computed():
    # group 0: r̄ = 1/3 → A = (1 − 1/3)/(1/3) = 2, (0 − 1/3)/(1/3) = −1, −1 ; group 1: r̄ = 1 → 0, 0
    assert torch.allclose(make_advantage("maxrl")(R, G), torch.tensor([2.0, -1.0, -1.0, 0.0, 0.0]))
    # a group without any success has no signal; one success in 16 gives A = 15 (the 1/p weight)
    zeros = make_advantage("maxrl")(torch.zeros(3), torch.zeros(3, dtype=torch.long))
    assert torch.equal(zeros, torch.zeros(3))
    one = make_advantage("maxrl")(torch.eye(16)[0])
    assert one[0].item() == pytest.approx(15.0) and one[1].item() == pytest.approx(-1.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(2, 12))
def test_maxrl_update_is_the_mean_over_successes(seed, n):
    """With binary rewards, mean_i A_i·x_i = mean over successes of x − mean over all of x: the
    maximum-likelihood estimator ∇log p = E[∇log π | success] plus a zero-mean control variate."""
    g = torch.Generator().manual_seed(seed)
    r = (torch.rand(n, generator=g) < 0.4).double()
    x = torch.randn(n, generator=g, dtype=torch.float64)
    adv = make_advantage("maxrl")(r)
    expected = x[r > 0].mean() - x.mean() if bool(r.any()) else torch.tensor(0.0, dtype=torch.float64)
    assert (adv * x).mean().item() == pytest.approx(expected.item(), abs=1e-12)


def test_reinforce_pp_hand_computed():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    g = torch.tensor([0, 0, 1, 1])
    # no mask (or equal lengths): mean 1/4, centred (3/4, −1/4, −1/4, −1/4), population var 3/16 → std √3/4
    plain = make_advantage("reinforce_pp")(r, g)
    s3 = 3**0.5
    assert torch.allclose(plain, torch.tensor([3 / 4, -1 / 4, -1 / 4, -1 / 4]) / (s3 / 4 + 1e-6), atol=1e-6)
    assert torch.allclose(plain, torch.tensor([s3, -1 / s3, -1 / s3, -1 / s3]), atol=1e-5)
    # baseline: R − group mean = (1/2, −1/2, 0, 0), mean 0, population var 1/8 → A = (√2, −√2, 0, 0)
    base = make_advantage("reinforce_pp", group_baseline=True)(r, g)
    assert torch.allclose(base, torch.tensor([2**0.5, -(2**0.5), 0.0, 0.0]), atol=1e-5)


def test_reinforce_pp_whitens_over_tokens():
    """OpenRLHF whitens the advantage broadcast to every valid token: lengths (1, 3, 2, 2), N = 8."""
    r = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1])
    mask = torch.arange(3) < torch.tensor([1, 3, 2, 2]).unsqueeze(-1)
    # token mean 1/8; centred (7/8, −1/8, −1/8, −1/8); var (49 + 3 + 2 + 2)/64/8 = 7/64 → std √7/8
    s7 = 7**0.5
    plain = make_advantage("reinforce_pp", eps=1e-12)(r, g, mask=mask)
    assert torch.allclose(plain, torch.tensor([s7, -1 / s7, -1 / s7, -1 / s7], dtype=torch.float64), atol=1e-9)
    # per sequence it would be (√3, −1/√3, …): the long sequences pull the mean and std
    assert plain[0].item() / make_advantage("reinforce_pp")(r, g)[0].item() == pytest.approx(s7 / 3**0.5, rel=1e-5)
    # baseline: (1/2, −1/2, 0, 0) has token mean −1/8; centred (5, −3, 1, 1)/8, var 7/64
    base = make_advantage("reinforce_pp", group_baseline=True, eps=1e-12)(r, g, mask=mask)
    assert torch.allclose(base, torch.tensor([5.0, -3.0, 1.0, 1.0], dtype=torch.float64) / s7, atol=1e-9)


def _openrlhf_whiten(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The whitening of OpenRLHF's experience_maker (commit 3c3be62) on [B, T] token advantages."""
    m = mask.to(adv.dtype)
    mean = (adv * m).sum() / m.sum()
    var = ((adv - mean).pow(2) * m).sum() / m.sum()
    return (adv - mean) * var.clamp(min=1e-8).rsqrt()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), B=st.integers(2, 8), T=st.integers(1, 6), baseline=st.booleans())
def test_reinforce_pp_matches_openrlhf_and_per_sequence_at_equal_lengths(seed, B, T, baseline):
    gen = torch.Generator().manual_seed(seed)
    r = torch.rand(B, generator=gen, dtype=torch.float64)
    g = torch.arange(B) // 2
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    mask = torch.arange(T) < lengths.unsqueeze(-1)
    adv = make_advantage("reinforce_pp", group_baseline=baseline, eps=1e-12)
    centred = make_advantage("group_mean")(r, g) if baseline else r  # R − group mean, or R
    ours = adv(r, g, mask=mask)
    theirs = _openrlhf_whiten(centred.unsqueeze(-1).expand(B, T), mask)
    if float(centred.std()) > 1e-3:  # away from OpenRLHF's variance floor
        assert torch.allclose(ours.unsqueeze(-1).expand(B, T)[mask], theirs[mask], atol=1e-8)
    # equal lengths: token whitening is sequence whitening (the no-mask path)
    full = torch.ones(B, T, dtype=torch.bool)
    assert torch.allclose(adv(r, g, mask=full), adv(r, g), atol=1e-12)


def test_reinforce_pp_mask_edge_cases():
    r = torch.tensor([1.0, 0.0])
    assert torch.equal(make_advantage("reinforce_pp")(r, mask=torch.zeros(2, 3, dtype=torch.bool)), torch.zeros(2))
    with pytest.raises(ValueError, match=r"mask must have shape \(2,\) \+ \[T\]"):
        make_advantage("reinforce_pp")(r, mask=torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must have a bool dtype"):
        make_advantage("reinforce_pp")(r, mask=torch.ones(2, 2))
    assert make_advantage("reinforce_pp").needs == ("mask",)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), S=st.integers(1, 3), n_groups=st.integers(1, 4), size=st.integers(2, 4))
def test_new_advantages_population_axis_is_independent(seed, S, n_groups, size):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.rand(S, n_groups * size, generator=g)
    group = torch.arange(n_groups).repeat_interleave(size)
    for adv in [make_advantage("maxrl"), make_advantage("reinforce_pp"), make_advantage("reinforce_pp", group_baseline=True)]:
        joint = adv(rewards, group)
        for s in range(S):
            assert torch.allclose(joint[s], adv(rewards[s], group), atol=1e-6)
    whitened = make_advantage("reinforce_pp")(rewards, group)
    # unit-variance values of size ≤ √n: float32 rounding of their mean reaches ~2e-6
    assert torch.allclose(whitened.mean(-1), torch.zeros(S), atol=1e-5)
    mask = torch.rand(S, n_groups * size, 3, generator=g) < 0.7
    tokens = make_advantage("reinforce_pp")(rewards, group, mask=mask)
    for s in range(S):
        assert torch.allclose(tokens[s], make_advantage("reinforce_pp")(rewards[s], group, mask=mask[s]), atol=1e-6)


def test_registry_lists_new_entries():
    assert {"maxrl", "reinforce_pp"} <= set(ADVANTAGES.names())
    assert make_advantage("maxrl").needs == ()
