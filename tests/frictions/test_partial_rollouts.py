"""Partial rollouts: chunk versions and positions by hand, strength 0 (chunks = 1) is the identity
bit for bit, every token is stamped with and scored by its own version, and the recorded true μ
of a whole answer matches its empirical frequency — alone and composed with landmine and ε-random."""

import pytest
import torch

from sandbox.core.seeding import derived_generator
from sandbox.frictions import FrictionStack, make_friction
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, metrics_only, train
from sandbox.tasks import make_task
from sandbox.tasks.bandits import Bandit
from tests.frictions.test_composition import _gap


def test_chunk_versions_and_positions_by_hand():
    f = make_friction("partial_rollouts", chunks=3)
    assert f.chunk_versions(6, 10) == [6, 8, 10]
    assert f.chunk_versions(6, 7) == [6, 6, 7]  # round half to even: 6.5 → 6
    assert f.chunk_versions(4, 4) == [4, 4, 4]
    assert f.chunk_of(5).tolist() == [0, 0, 1, 1, 2]
    assert f.chunk_of(2).tolist() == [0, 1]
    with pytest.raises(ValueError, match="latest"):
        f.chunk_versions(6, 5)
    with pytest.raises(ValueError, match="chunks"):
        make_friction("partial_rollouts", chunks=0)


def test_strength_zero_is_the_identity_bit_for_bit():
    base = RunConfig(task="reverse_copy", task_kwargs=dict(H=3, population=2, prompts_per_step=2, samples_per_prompt=4,
                                                           width=16, heads=2, layers=1, mlp=16),
                     estimator="tis", steps=6, log_points=3, lr=0.05, staleness={"kind": "fixed", "D": 2})
    plain = train(base)
    chunked = train(base.replace(frictions=(("partial_rollouts", {"chunks": 1}),)))
    assert metrics_only(plain).equals(metrics_only(chunked))


STACKS = {"alone": [], "landmine": [("landmine", {"p_bug": 0.3})], "eps_random": [("eps_random", {"eps": 0.3})]}


def _task(others, first=True, samples=20000):
    task = make_task("reverse_copy", H=2, V=3, n_prompts=1, prompts_per_step=1, samples_per_prompt=samples,
                     width=16, heads=2, layers=1, mlp=16, init_std=0.5, dtype="float64")
    items = [("partial_rollouts", {"chunks": 2})] + others if first else others + [("partial_rollouts", {"chunks": 2})]
    task.attach_frictions(FrictionStack([make_friction(n, **kw) for n, kw in items]))
    return task


def _versions(task):
    """Two versions with very different policies (one init, and another init scaled up)."""
    old = task.init_params(derived_generator(0, "init"))
    new = [3 * p for p in task.model.init(1, derived_generator(1, "init"), torch.float64)]
    return {3: old, 5: new}


@pytest.mark.parametrize("name,first", [("alone", True), ("landmine", True), ("landmine", False),
                                        ("eps_random", True), ("eps_random", False)])
def test_true_mu_matches_frequencies(name, first):
    task = _task(STACKS[name], first)
    versions = _versions(task)
    rollout = collect(task, versions[3], 3, derived_generator(0, "draw"), 0, params_of=versions.get, latest=5)
    answers = rollout.actions[0]
    gap, _ = _gap(answers[:, 0] * 3 + answers[:, 1], rollout.true_behavior_logp[0].sum(-1), 9)
    assert gap < 0.02, gap
    assert rollout.version[0].unique(dim=0).tolist() == [[3, 5]]


def test_each_token_is_scored_by_its_own_version():
    task = _task([], samples=64)
    versions = _versions(task)
    rollout = collect(task, versions[3], 3, derived_generator(0, "draw"), 0, params_of=versions.get, latest=5)
    old = task.model.answer_logp(versions[3], rollout.obs, rollout.actions)
    new = task.model.answer_logp(versions[5], rollout.obs, rollout.actions)
    assert torch.allclose(rollout.true_behavior_logp[..., 0], old[..., 0])
    assert torch.allclose(rollout.true_behavior_logp[..., 1], new[..., 1])
    assert not torch.allclose(old[..., 1], new[..., 1])  # the versions really differ
    assert torch.equal(rollout.behavior_logp, rollout.true_behavior_logp)  # it reports what it sampled


def test_needs_a_sequence_task_and_the_history():
    task = _task([], samples=4)
    versions = _versions(task)
    with pytest.raises(ValueError, match="params_of"):
        collect(task, versions[3], 3, derived_generator(0, "draw"), 0)
    bandit = Bandit(N=2, K=3, frictions=FrictionStack([make_friction("partial_rollouts", chunks=2)]))
    params = bandit.init_params(derived_generator(0, "init"))
    with pytest.raises(ValueError, match="sequence task"):
        collect(bandit, params, 0, derived_generator(0, "draw"), 0, params_of=lambda v: params, latest=1)
    config = RunConfig(task="reverse_copy", task_kwargs=dict(H=2, prompts_per_step=1, samples_per_prompt=2, width=16,
                                                             heads=2, layers=1, mlp=16),
                       steps=2, history="rollouts", frictions=(("partial_rollouts", {"chunks": 2}),))
    with pytest.raises(ValueError, match="history='params'"):
        train(config)


def test_does_not_compose_with_a_friction_that_reports_another_distribution():
    task = _task([("truncated_sampling", {"top_p": 0.8, "report": "full"})], samples=4)
    versions = _versions(task)
    with pytest.raises(ValueError, match="does not compose"):
        collect(task, versions[3], 3, derived_generator(0, "draw"), 0, params_of=versions.get, latest=5)


def test_in_the_loop_tokens_carry_the_versions_between_start_and_now():
    config = RunConfig(task="reverse_copy", task_kwargs=dict(H=4, prompts_per_step=2, samples_per_prompt=2, width=16,
                                                             heads=2, layers=1, mlp=16),
                       estimator="tis", steps=8, lr=0.05, staleness={"kind": "fixed", "D": 3},
                       frictions=(("partial_rollouts", {"chunks": 4}),))
    learner = ActorLearner(config)
    for step in range(6):
        rollout = learner.rollout(step)
        start = max(0, step - 3)
        assert rollout.version[0, 0].tolist() == make_friction("partial_rollouts", chunks=4).chunk_versions(start, step)
        learner.update(step, rollout)
        learner.after_update(step + 1)
