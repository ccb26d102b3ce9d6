"""The ``Policy`` protocol, checked on every built-in family and on the README's one-file plugin:
the actor's reported log-probs of a friction-free rollout are the learner's ``score`` of the same
tokens (one scorer, one meaning of temperature), and a registered policy trains on a sequence task
through ``policy_family``."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

from sandbox.core.seeding import derived_generator
from sandbox.policies.base import POLICIES, Policy
from sandbox.runtime.actor import collect
from sandbox.tasks import make_task

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "linear_softmax_policy.py"
SEQ = {"H": 3, "width": 16, "heads": 2, "layers": 1, "mlp": 32, "prompts_per_step": 3, "samples_per_prompt": 4,
       "population": 2}
HF = {"env": "reverse", "env_kwargs": {"length": 3}, "hidden": 16, "layers": 1, "heads": 2, "prompts_per_step": 3,
      "samples_per_prompt": 2, "eval_prompts": 2}


@pytest.fixture
def linear_softmax():
    """The README's plugin policy, imported as ``sandbox run --plugin`` would (unregistered after)."""
    spec = importlib.util.spec_from_file_location("linear_softmax_policy", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.LinearSoftmax
    POLICIES._entries.pop("linear_softmax", None)


def _rollout(name, kwargs):
    task = make_task(name, **kwargs)
    params = task.init_params(derived_generator(0, "init"))
    if name == "reverse_copy" and kwargs.get("policy_family") == "linear_softmax":
        params = [torch.randn(p.shape, generator=derived_generator(0, "w"), dtype=p.dtype) for p in params]
    return task, params, collect(task, params, 0, derived_generator(0, "roll"), 0)


@pytest.mark.parametrize("name, kwargs", [
    ("bandit", {"N": 3, "K": 4, "population": 2, "init_std": 0.5, "batch_size": 5, "samples_per_context": 2}),
    ("reverse_copy", SEQ),
    ("hf_text", HF),
    ("hf_text", {**HF, "temperature": 0.7}),  # the policy's τ: the actor samples and the learner scores softmax(z/τ)
], ids=["tabular", "transformer", "causal_lm", "causal_lm-tau"])
def test_the_actor_reports_what_the_learner_scores(name, kwargs):
    task, params, rollout = _rollout(name, kwargs)
    assert isinstance(task.policy, Policy)
    learner = task.score(params, rollout, grad=False).logp
    torch.testing.assert_close(learner.masked_fill(~rollout.mask, 0.0), rollout.behavior_logp, rtol=0, atol=2e-5)


def test_the_sequence_tasks_temperature_is_a_sampler_temperature_over_a_tau_one_policy():
    """``temperature`` of a sequence task is τ_s: the actor draws from z/τ_s, the learner scores z."""
    task, params, rollout = _rollout("reverse_copy", {**SEQ, "temperature": 0.5})
    learner = task.score(params, rollout, grad=False).logp
    logits = task.model.answer_logits(params, rollout.obs, rollout.actions)
    torch.testing.assert_close(learner, torch.log_softmax(logits, -1).gather(-1, rollout.actions.unsqueeze(-1))[..., 0])
    sampled = torch.log_softmax(logits / 0.5, -1).gather(-1, rollout.actions.unsqueeze(-1))[..., 0]
    torch.testing.assert_close(rollout.behavior_logp, sampled, rtol=0, atol=1e-5)
    assert not torch.allclose(learner, rollout.behavior_logp, atol=1e-3)


def test_a_registered_policy_family_samples_and_scores_through_the_protocol(linear_softmax):
    task, params, rollout = _rollout("reverse_copy", {**SEQ, "policy_family": "linear_softmax"})
    assert isinstance(task.policy, linear_softmax) and rollout.actions.shape == (2, 12, 3)
    torch.testing.assert_close(task.score(params, rollout, grad=False).logp, rollout.behavior_logp, rtol=0, atol=1e-6)
    metrics = task.evaluate(params, derived_generator(0, "eval"))
    assert set(metrics) == {"error", "reward", "exact"} and metrics["error"].shape == (2,)


def test_policy_family_knobs_are_checked(linear_softmax):
    with pytest.raises(ValueError, match="policy_family: unknown policy 'nope'"):
        make_task("reverse_copy", policy_family="nope")
    with pytest.raises(ValueError, match="policy_kwargs: the 'transformer' policy's knobs are task 'reverse_copy'"):
        make_task("reverse_copy", policy_kwargs={"width": 8})
    with pytest.raises(ValueError, match="objective: objective 'screened' re-runs the kept rows .* LinearSoftmax has none"):
        make_task("reverse_copy", policy_family="linear_softmax", backward="screened")


def test_a_task_is_its_three_parts():
    """``Task(environment, policy, objective)`` built by hand is the registered task: the same rollout
    and the same learner scores, bit for bit."""
    from sandbox.tasks import Task

    registered = make_task("reverse_copy", **SEQ)
    by_hand = Task(registered.environment, registered.policy, registered.objective, population=2)
    runs = []
    for task in (registered, by_hand):
        params = task.init_params(derived_generator(0, "init"))
        rollout = collect(task, params, 0, derived_generator(0, "roll"), 0)
        runs.append((rollout, task.score(params, rollout, grad=False).logp))
    (a, la), (b, lb) = runs
    assert torch.equal(a.actions, b.actions) and torch.equal(a.behavior_logp, b.behavior_logp)
    assert torch.equal(a.rewards, b.rewards) and torch.equal(la, lb)
