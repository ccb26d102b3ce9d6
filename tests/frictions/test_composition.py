"""Composed frictions: the recorded true μ of a whole friction stack is the distribution the actor
really sampled from (issue 10). Every ordered pair of row-overriding and probability-changing
frictions, on a 4-arm bandit and on a one-prompt sequence task: the empirical frequency of each
action (answer) over a large batch matches exp(true_behavior_logp) within 0.02."""

import itertools

import pytest
import torch

from sandbox.core.seeding import derived_generator
from sandbox.frictions import FrictionStack, make_friction
from sandbox.runtime.actor import collect
from sandbox.tasks import make_task
from sandbox.tasks.bandits import Bandit

FRICTIONS = {
    "landmine": ("landmine", {"p_bug": 0.3}),
    "rare_discovery": ("rare_discovery", {"p_disc": 0.2}),
    "eps_random": ("eps_random", {"eps": 0.3}),
    "logit_noise": ("logit_noise", {"sigma": 1.0}),
}
PAIRS = [pair for pair in itertools.permutations(FRICTIONS, 2) if {"landmine", "rare_discovery"} & set(pair)]


def _stack(names):
    return FrictionStack([make_friction(FRICTIONS[n][0], **FRICTIONS[n][1]) for n in names])


def _gap(keys, true_logp, n_keys):
    """max over keys of |empirical frequency − recorded true μ|; every row of a key records the same μ."""
    freq = torch.bincount(keys, minlength=n_keys).double() / keys.numel()
    mu = torch.full((n_keys,), float("nan"), dtype=torch.float64)
    mu[keys] = true_logp.double().exp()
    seen = ~mu.isnan()
    assert torch.allclose(mu[keys], true_logp.double().exp()), "rows of one action recorded different μ"
    return float((freq[seen] - mu[seen]).abs().max()), float(mu[seen].sum())


@pytest.mark.parametrize("pair", PAIRS, ids="+".join)
def test_bandit_pair_true_mu_matches_frequencies(pair):
    task = Bandit(N=1, K=4, batch_size=40000, population=1, dtype="float64", frictions=_stack(pair))
    task.init_params(derived_generator(0, "init"))
    task.env.label_table = torch.zeros(1, 1, dtype=torch.long)  # correct arm 0, landmine's wrong arm 1
    z = torch.tensor([[[0.5, 0.0, -0.5, 0.2]]], dtype=torch.float64)
    rollout = collect(task, [z], 0, derived_generator(0, "draw"), 0)
    gap, total = _gap(rollout.actions[0, :, 0], rollout.true_behavior_logp[0, :, 0], 4)
    assert gap < 0.02, (pair, gap)
    assert abs(total - 1) < 1e-9 or total < 1  # μ of the seen actions sums to ≤ 1 (= 1 when all were drawn)


def test_the_issue_example_landmine_then_rare_discovery():
    """The issue's 4-arm example: sampled [0.38, 0.14, 0.14, 0.34]; μ must now record the same."""
    task = Bandit(N=1, K=4, batch_size=40000, population=1, dtype="float64",
                  frictions=_stack(["landmine", "rare_discovery"]))
    task.init_params(derived_generator(0, "init"))
    task.env.label_table = torch.full((1, 1), 3, dtype=torch.long)  # correct arm 3, wrong arm 0
    rollout = collect(task, [torch.zeros(1, 1, 4, dtype=torch.float64)], 0, derived_generator(1, "draw"), 0)
    mu = torch.zeros(4, dtype=torch.float64)
    mu[rollout.actions[0, :, 0]] = rollout.true_behavior_logp[0, :, 0].exp()
    assert torch.allclose(mu, torch.tensor([0.38, 0.14, 0.14, 0.34], dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("pair", PAIRS, ids="+".join)
def test_sequence_pair_true_mu_matches_frequencies(pair):
    """One prompt (a pool of one), answers of 2 binary tokens: 4 possible answers per row."""
    task = make_task("reverse_copy", H=2, n_prompts=1, prompts_per_step=1, samples_per_prompt=20000,
                     width=16, heads=2, layers=1, mlp=16, init_std=0.5, dtype="float64")
    task.attach_frictions(_stack(pair))
    params = task.init_params(derived_generator(0, "init"))
    rollout = collect(task, params, 0, derived_generator(0, "draw"), 0)
    answers = rollout.actions[0]
    keys = answers[:, 0] * 2 + answers[:, 1]
    gap, _ = _gap(keys, rollout.true_behavior_logp[0].sum(-1), 4)
    assert gap < 0.02, (pair, gap)


def test_exact_mode_rejects_row_overrides_and_reward_noise():
    for name in ("landmine", "rare_discovery"):
        task = Bandit(N=2, K=3, mode="exact", frictions=_stack([name]))
        params = task.init_params(derived_generator(0, "init"))
        with pytest.raises(ValueError, match="need mode='sampled'"):
            collect(task, params, 0, derived_generator(0, "draw"), 0)
    task = Bandit(N=2, K=3, mode="exact", frictions=FrictionStack([make_friction("gaussian_reward", sigma=0.5)]))
    params = task.init_params(derived_generator(0, "init"))
    with pytest.raises(ValueError, match="need mode='sampled'"):
        collect(task, params, 0, derived_generator(0, "draw"), 0)
