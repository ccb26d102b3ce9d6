"""Truncated sampling (top-k / top-p): hand values of the truncation, strength 0 = identity bit for
bit, and the recorded true μ against empirical frequencies — alone and composed with landmine and
ε-random, on a bandit and on a sequence task — with the reported μ the truncated (default) or the
full distribution's."""

import pytest
import torch

from sandbox.core.seeding import derived_generator
from sandbox.frictions import FrictionStack, make_friction
from sandbox.frictions.truncation import truncate
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import metrics_only, train
from sandbox.tasks import make_task
from sandbox.tasks.bandits import Bandit
from tests.frictions.test_composition import _gap

P = torch.tensor([0.3, 0.5, 0.05, 0.15], dtype=torch.float64)
Z = torch.tensor([[[0.5, 0.0, -0.5, 0.2, -1.0, 0.9]]], dtype=torch.float64)  # a 6-arm bandit's logits


def test_truncate_hand_values():
    assert torch.allclose(truncate(P, top_p=0.8), torch.tensor([0.375, 0.625, 0, 0], dtype=torch.float64))
    assert torch.allclose(truncate(P, top_p=0.5), torch.tensor([0.0, 1.0, 0, 0], dtype=torch.float64))
    assert torch.allclose(truncate(P, top_p=0.81), torch.tensor([0.3, 0.5, 0, 0.15], dtype=torch.float64) / 0.95)
    assert torch.allclose(truncate(P, top_k=3), torch.tensor([0.3, 0.5, 0, 0.15], dtype=torch.float64) / 0.95)
    assert torch.allclose(truncate(P, top_p=0.9, top_k=2), torch.tensor([0.375, 0.625, 0, 0], dtype=torch.float64))
    assert truncate(P) is P and truncate(P, top_k=4) is P
    batch = torch.stack([P, P.flip(0)])  # per row, over the last axis
    assert torch.allclose(truncate(batch, top_k=1), torch.eye(4, dtype=torch.float64)[[1, 2]])


@pytest.mark.parametrize("kwargs", [{"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -1}, {"report": "raw"}])
def test_bad_settings_raise(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        make_friction("truncated_sampling", **kwargs)


@pytest.mark.parametrize("kwargs", [{"top_p": 0.0}, {"top_k": -2}])
def test_truncate_checks_its_inputs(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        truncate(P, **kwargs)


@pytest.mark.parametrize("report", ["truncated", "full"])
@pytest.mark.parametrize("task", ["bandit", "reverse_copy"])
def test_strength_zero_is_the_identity_bit_for_bit(task, report):
    kwargs = dict(K=5, N=3, batch_size=8, population=2) if task == "bandit" else \
        dict(H=3, population=2, prompts_per_step=2, samples_per_prompt=4, width=16, heads=2, layers=1, mlp=16)
    base = RunConfig(task=task, task_kwargs=kwargs, estimator="tis", steps=6, log_points=3, lr=0.05,
                     staleness={"kind": "fixed", "D": 2})
    plain = train(base)
    with_friction = train(base.replace(frictions=(("truncated_sampling", {"top_p": 1.0, "report": report}),)))
    assert not FrictionStack([make_friction("truncated_sampling", report=report)])
    assert metrics_only(plain).equals(metrics_only(with_friction))


STACKS = {
    "alone": [],
    "landmine": [("landmine", {"p_bug": 0.3})],
    "eps_random": [("eps_random", {"eps": 0.3})],
}
ORDERS = [(name, first) for name in STACKS for first in ((True, False) if STACKS[name] else (True,))]


def _stack(truncation, others, first):
    items = [truncation] + others if first else others + [truncation]
    return FrictionStack([make_friction(n, **kw) for n, kw in items])


@pytest.mark.parametrize("report", ["truncated", "full"])
@pytest.mark.parametrize("name,first", ORDERS)
def test_bandit_true_mu_matches_frequencies_and_reported_is_what_the_engine_reports(name, first, report):
    truncation = ("truncated_sampling", {"top_p": 0.7, "top_k": 4, "report": report})
    task = Bandit(N=1, K=6, batch_size=40000, population=1, dtype="float64",
                  frictions=_stack(truncation, STACKS[name], first))
    task.init_params(derived_generator(0, "init"))
    task.env.label_table = torch.zeros(1, 1, dtype=torch.long)
    rollout = collect(task, [Z], 0, derived_generator(0, "draw"), 0)
    actions, true = rollout.actions[0, :, 0], rollout.true_behavior_logp[0, :, 0]
    gap, _ = _gap(actions, true, 6)
    assert gap < 0.02, gap
    if name == "alone":
        full = torch.softmax(Z[0, 0], -1)
        kept = truncate(full, 0.7, 4)
        assert int((kept > 0).sum()) < 6  # the truncation bites
        assert torch.allclose(true, kept[actions].log())
        expected = full[actions].log() if report == "full" else kept[actions].log()
        assert torch.allclose(rollout.behavior_logp[0, :, 0], expected)
        if report == "full":  # off by the surviving mass: log μ_true − log μ_reported = −log Z
            mass = full[kept > 0].sum()
            assert torch.allclose(true - rollout.behavior_logp[0, :, 0], -mass.log().expand_as(true))
    elif name == "eps_random" and report == "truncated":  # the engine reports what it sampled
        assert torch.equal(rollout.behavior_logp, rollout.true_behavior_logp)


@pytest.mark.parametrize("report", ["truncated", "full"])
@pytest.mark.parametrize("name,first", ORDERS)
def test_sequence_true_mu_matches_frequencies(name, first, report):
    """One prompt, answers of 2 tokens over V = 3: 9 answers; top-p 0.8 drops each position's tail."""
    task = make_task("reverse_copy", H=2, V=3, n_prompts=1, prompts_per_step=1, samples_per_prompt=20000,
                     width=16, heads=2, layers=1, mlp=16, init_std=0.5, dtype="float64")
    task.attach_frictions(_stack(("truncated_sampling", {"top_p": 0.8, "report": report}), STACKS[name], first))
    params = task.init_params(derived_generator(0, "init"))
    rollout = collect(task, params, 0, derived_generator(0, "draw"), 0)
    answers = rollout.actions[0]
    gap, _ = _gap(answers[:, 0] * 3 + answers[:, 1], rollout.true_behavior_logp[0].sum(-1), 9)
    assert gap < 0.02, gap
    if name == "alone":
        full = task.model.answer_logp(params, rollout.obs, rollout.actions)
        assert bool((rollout.true_behavior_logp >= full - 1e-12).all())  # truncation only moves mass onto kept tokens
        if report == "full":
            assert torch.allclose(rollout.behavior_logp, full)
            assert bool((rollout.true_behavior_logp > rollout.behavior_logp).any())
        else:
            assert torch.equal(rollout.behavior_logp, rollout.true_behavior_logp)


@pytest.mark.parametrize("report", ["truncated", "full"])
def test_the_reporting_replay_redraws_fresh_logit_noise(report):
    """With fresh logit noise every draw has its own noise: the replay that computes the reported
    log-probs must redraw the same noise (else it would draw other tokens and raise)."""
    stack = FrictionStack([make_friction("logit_noise", sigma=0.5, fresh=True),
                           make_friction("truncated_sampling", top_p=0.7, report=report)])
    task = Bandit(N=1, K=6, batch_size=2000, population=1, dtype="float64", frictions=stack)
    task.init_params(derived_generator(0, "init"))
    rollout = collect(task, [Z], 0, derived_generator(0, "draw"), 0)
    true, reported = rollout.true_behavior_logp, rollout.behavior_logp
    if report == "truncated":
        assert torch.equal(reported, true)
    else:  # a kept token's truncated probability is its full one over the kept mass Z ≤ 1
        assert bool((true >= reported).all()) and bool((true > reported).any())


def test_exact_mode_reports_full_and_weights_with_the_truncated_distribution():
    task = Bandit(N=1, K=6, mode="exact", population=1, dtype="float64",
                  frictions=FrictionStack([make_friction("truncated_sampling", top_p=0.7, report="full")]))
    task.init_params(derived_generator(0, "init"))
    rollout = collect(task, [Z], 0, derived_generator(0, "draw"), 0)
    full, kept = torch.softmax(Z[0, 0], -1), truncate(torch.softmax(Z[0, 0], -1), 0.7)
    assert torch.allclose(rollout.extras["weights"][0, :, 0], kept)
    assert torch.allclose(rollout.behavior_logp[0, :, 0], full.log())
    on = kept > 0
    assert torch.allclose(rollout.true_behavior_logp[0, on, 0], kept[on].log())
