"""A run composed by name (issue 47): every task preset takes ``policy`` (+ ``policy_kwargs``) and
``objective``; each built-in family — tabular, MLP, transformer, causal LM — is chosen by name on
every environment whose observations it reads, and refused in one line naming both elsewhere; the
older knobs (``mode``, ``backward``, ``policy_family``) give the same run as the new keys."""

from __future__ import annotations

import pytest
import torch

import sandbox.envs.mnist as mn
from sandbox.core.observations import ContextIdSpec, TextPromptSpec, TokenPromptSpec
from sandbox.core.seeding import derived_generator
from sandbox.policies.base import POLICIES
from sandbox.policies.hf.policy import HFPolicy
from sandbox.policies.mlp import MLP
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.tasks import TASKS, load_tasks, make_task

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILIES = ("tabular", "mlp", "transformer", "causal_lm")
#: small knobs for a family built from an environment's spec (not the preset's own)
SMALL = {"tabular": {}, "mlp": {"hidden": 8}, "transformer": {"width": 16, "heads": 2, "layers": 1, "mlp": 16},
         "causal_lm": {"hidden": 16, "layers": 1, "heads": 2}}


def _tasks() -> list[str]:
    load_tasks()
    return TASKS.names()


def _default(name: str):
    return make_task(name, **({"download": False} if name == "mnist" else {}))


def _family_of(policy):
    """The built family (the regime's warm start wraps its policy)."""
    return type(getattr(policy, "inner", policy))


@pytest.mark.parametrize("task", _tasks())
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_chosen_by_name_where_it_reads_the_observations_and_refused_elsewhere(task, family):
    spec = _default(task).environment.spec
    cls = POLICIES.get(family)
    own = _default(task).given_names["policy"] == family
    kwargs = {"download": False} if task == "mnist" else {}
    if isinstance(spec, cls.reads):
        built = make_task(task, policy=family, policy_kwargs={} if own else SMALL[family], **kwargs)
        assert issubclass(_family_of(built.policy), cls)
        assert built.given_names == {"policy": family, "objective": "plain"}
    else:
        with pytest.raises(ValueError) as err:
            make_task(task, policy=family, **kwargs)
        message = str(err.value)
        assert message == f"policy: policy {family!r} reads {' or '.join(s.kind for s in cls.reads)}; task {task!r} " \
                          f"shows {spec.kind}"


def test_the_matrix_covers_every_kind_each_family_reads():
    """Every kind a built-in family reads is shown by some registered environment (so the matrix above
    trains nothing vacuous), and each family is built somewhere."""
    shown = {type(_default(task).environment.spec) for task in _tasks()}
    for family in FAMILIES:
        assert set(POLICIES.get(family).reads) <= shown, family


def _learns(config: RunConfig, drop: float) -> None:
    frame = train(config)
    first, last = frame[frame.step == 0].error.mean(), frame[frame.step == frame.step.max()].error.mean()
    assert last < first - drop, (first, last)


@pytest.mark.parametrize("task", ["bandit", "gaussian_bandit"])
@pytest.mark.parametrize("family", ["tabular", "mlp"])
def test_tabular_and_mlp_train_by_name_on_context_ids(task, family):
    kwargs = {"policy": family, "population": 2, "batch_size": 32, **({"N": 4, "K": 5} if task == "bandit" else {})}
    if family != "tabular":
        kwargs["policy_kwargs"] = {"hidden": 16}
    _learns(RunConfig(task=task, task_kwargs=kwargs, estimator="reinforce", lr=0.05, steps=60, log_points=2), 0.1)


@pytest.mark.skipif(mn.find_test_split() is None, reason="the MNIST test split was not found ($SANDBOX_MNIST_DIR)")
def test_the_mlp_trains_by_name_on_context_vectors():
    _learns(RunConfig(task="mnist", task_kwargs={"policy": "mlp", "hidden": 32, "batch_size": 64, "eval_size": 500},
                      estimator="reinforce", lr=3e-3, steps=40, log_points=2), 0.2)


@pytest.mark.parametrize("family, lr", [("transformer", 3e-3), ("causal_lm", 3e-3)])
def test_the_transformer_and_the_causal_lm_train_by_name_on_token_prompts(family, lr):
    kwargs = {"H": 2, "policy": family, **({"width": 32, "layers": 1} if family == "transformer" else
                                             {"policy_kwargs": {"hidden": 32, "layers": 1, "heads": 2}})}
    _learns(RunConfig(task="reverse_copy", task_kwargs=kwargs, estimator="reinforce", lr=lr, steps=120, log_points=2),
            0.15)


def test_the_causal_lm_is_built_from_a_text_spec():
    """``from_spec`` of the text environments' spec: a tiny random model over their tokenizer, which
    samples and scores through the protocol as the preset's own does."""
    task = make_task("text_reverse", prompts_per_step=2, samples_per_prompt=2, eval_prompts=2, hidden=16, layers=1,
                     heads=2)
    spec = task.environment.spec
    assert isinstance(spec, TextPromptSpec) and spec.new_tokens == task.new_tokens
    policy = HFPolicy.from_spec(spec, hidden=16, layers=1, heads=2)
    from sandbox.tasks import Task

    composed = Task(task.environment, policy)
    params = composed.init_params(derived_generator(0, "init"))
    rollout = collect(composed, params, 0, derived_generator(0, "roll"), 0)
    torch.testing.assert_close(composed.score(params, rollout, grad=False).logp, rollout.behavior_logp, rtol=0, atol=1e-5)


def test_a_one_model_family_refuses_a_population():
    with pytest.raises(ValueError, match="^population: policy 'causal_lm' is one model per run .* population=2$"):
        make_task("reverse_copy", population=2, policy="causal_lm")


def test_an_mlp_reads_context_ids_as_one_hot_vectors():
    mlp = MLP.from_spec(ContextIdSpec(n_contexts=3, n_actions=4), hidden=5)
    assert (mlp.d_in, mlp.hidden, mlp.n_out) == (3, 5, 4)
    params = mlp.init(2, derived_generator(0, "init"))
    ids = torch.tensor([[0, 2, 1], [1, 1, 0]])
    one_hot = torch.nn.functional.one_hot(ids, 3).float()
    assert torch.equal(mlp.logits(params, ids), mlp.logits(params, one_hot))
    actions = torch.tensor([[0, 3, 1], [2, 2, 0]])
    leaves = [p.clone().requires_grad_(True) for p in params]
    logp = torch.log_softmax(mlp.logits(leaves, ids), -1).gather(-1, actions.unsqueeze(-1))[..., 0]
    grads = torch.autograd.grad(logp[1, 2], leaves)
    torch.testing.assert_close(mlp.grad_sq_norms(params, ids, actions)[1, 2], sum(g.pow(2).sum() for g in grads))


# ----------------------------------------------------------------------------- objectives by name
def _rollout_and_loss(task):
    from sandbox.estimators import make_estimator
    from sandbox.runtime.learner import learner_terms

    params = task.init_params(derived_generator(0, "init"))
    rollout = collect(task, params, 0, derived_generator(0, "roll"), 0)
    from sandbox.advantages import make_advantage

    terms = learner_terms(task, params, rollout, make_advantage("constant"), None, False)
    estimator = make_estimator("kondo") if task.objective.rescores else make_estimator("reinforce")
    return rollout, task.objective(estimator, terms, rollout, params).loss


@pytest.mark.parametrize("task, new, old", [
    ("bandit", {"objective": "exact"}, {"mode": "exact"}),
    ("mnist", {"objective": "exact", "download": False}, {"mode": "exact", "download": False}),
    ("reverse_copy", {"objective": "screened", "H": 3}, {"backward": "screened", "H": 3}),
    ("reverse_copy", {"policy": "causal_lm", "H": 2}, {"policy_family": "causal_lm", "H": 2}),
])
def test_the_new_keys_name_the_same_run_as_the_older_knobs(task, new, old):
    a, b = make_task(task, **new), make_task(task, **old)
    assert type(a.objective) is type(b.objective) and type(a.policy) is type(b.policy)
    if task == "mnist":
        return  # (no images read here)
    (ra, la), (rb, lb) = _rollout_and_loss(a), _rollout_and_loss(b)
    assert torch.equal(ra.actions, rb.actions) and torch.equal(ra.behavior_logp, rb.behavior_logp)
    assert torch.equal(la, lb)


@pytest.mark.parametrize("task, kwargs, message", [
    ("reverse_copy", {"objective": "exact"},
     "objective: objective 'exact' reads context ids or context vectors; task 'reverse_copy' shows token prompts"),
    ("bandit", {"objective": "screened"}, "objective: objective 'screened' reads token prompts; task 'bandit' shows context ids"),
    ("hf_text", {"objective": "exact"}, "objective: objective 'exact' reads context ids or context vectors; task 'hf_text' "
                                        "shows text prompts"),
    ("bandit", {"objective": "nope"}, r"objective: unknown objective 'nope'; known: \['exact', 'plain', 'screened'\]"),
    ("bandit", {"mode": "exact", "objective": "screened"}, "objective='screened' contradicts mode"),
    ("reverse_copy", {"policy": "causal_lm", "policy_family": "transformer"}, None),  # the older knob at its default
    ("reverse_copy", {"policy": "causal_lm", "policy_family": "tabular"}, "policy='causal_lm' contradicts policy_family"),
    ("reverse_copy", {"objective": "screened", "policy": "causal_lm"}, "objective: objective 'screened' re-runs the kept "
                                                                       "rows .* HFPolicy has none"),
])
def test_objectives_and_policies_that_cannot_run_are_refused_in_one_line(task, kwargs, message):
    if message is None:
        assert isinstance(make_task(task, **kwargs).policy, HFPolicy)
        return
    with pytest.raises(ValueError, match=message) as err:
        make_task(task, **kwargs)
    assert "\n" not in str(err.value)


def test_a_token_prompt_spec_is_the_sequence_problems_sizes():
    task = make_task("reverse_copy", H=4, V=3)
    assert task.environment.spec == TokenPromptSpec(vocab=3, prompt_len=4, answer_len=4)


def test_seeds_of_a_one_model_family_are_separate_runs():
    """``sandbox run --seeds N`` reads the chosen family's ``one_model_per_run``: a sequence task with
    the causal LM makes N runs, with the transformer one population of N."""
    from sandbox.cli_run import run_configs

    lm = RunConfig(task="reverse_copy", task_kwargs={"H": 2, "policy": "causal_lm"}, steps=1)
    assert [(c.seed, c.task_kwargs.get("population")) for c in run_configs(lm, 3)] == [(0, None), (1, None), (2, None)]
    transformer = RunConfig(task="reverse_copy", task_kwargs={"H": 2}, steps=1)
    assert [c.task_kwargs["population"] for c in run_configs(transformer, 3)] == [3]


def test_the_transformer_is_built_from_a_token_spec():
    """``TransformerPolicy.from_spec``: the tiny transformer over the spec's vocabulary and context,
    with its knobs as ``policy_kwargs`` (what a preset whose own family is another would build)."""
    from sandbox.policies.transformer_policy import TransformerPolicy

    policy = TransformerPolicy.from_spec(TokenPromptSpec(vocab=3, prompt_len=4, answer_len=4), **SMALL["transformer"])
    assert (policy.model.vocab, policy.model.context, policy.model.width) == (3, 8, 16)
    task = make_task("reverse_copy", H=4, V=3)
    from sandbox.tasks import Task

    composed = Task(task.environment, policy)
    params = composed.init_params(derived_generator(0, "init"))
    rollout = collect(composed, params, 0, derived_generator(0, "roll"), 0)
    torch.testing.assert_close(composed.score(params, rollout, grad=False).logp, rollout.behavior_logp, rtol=0, atol=1e-5)
