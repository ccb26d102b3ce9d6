"""The categorical family is a composition: a contextual environment (``sandbox.envs.contextual``)
× a categorical policy (``sandbox.policies.categorical``) × the objective of ``mode``. A new
environment written here, with no model, trains with the tabular policy; the bandits' and MNIST's
objects satisfy the two contracts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from sandbox.core.observations import ContextIdSpec
from sandbox.core.seeding import derived_generator
from sandbox.envs.bandits import BanditEnv, GaussianBanditEnv, expected_return
from sandbox.envs.contextual import ContextualEnv
from sandbox.envs.mnist import MNISTEnv
from sandbox.frictions.base import FrictionStack
from sandbox.policies.categorical import CategoricalPolicy
from sandbox.policies.mlp import MLP
from sandbox.policies.tabular import TabularPolicy
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.tasks import TASKS, Task, make_task, register_task
from sandbox.tasks.bandits import Bandit, GaussianBandit
from sandbox.tasks.categorical import compose
from sandbox.tasks.mnist import MNIST


@dataclass
class Modulo(ContextualEnv):
    """N contexts, K actions; the correct action of context n is n mod K."""

    population: int
    N: int = 6
    n_actions: int = 3

    def sample_contexts(self, n, generator):
        return torch.randint(0, self.N, (self.population, n), generator=generator)

    def labels(self, contexts):
        return contexts % self.n_actions

    @property
    def spec(self):
        return ContextIdSpec(self.N, self.n_actions)

    def features(self, contexts, dtype=torch.float32):
        return contexts

    def evaluate(self, logits_of, dtype):
        contexts = torch.arange(self.N).expand(self.population, self.N)
        return {"error": 1 - expected_return(logits_of(contexts), self.labels(contexts))}


@dataclass
class ModuloTask(Task):
    """The test's environment × the tabular policy: the whole task is its knobs."""

    batch_size: int = 12
    samples_per_context: int = 2
    population: int = 2
    mode: str = "sampled"
    policy: str = "tabular"
    policy_kwargs: dict = field(default_factory=dict)
    objective: str = "plain"
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        env = Modulo(self.population)
        compose(self, env, "tabular", lambda: TabularPolicy(env.N, env.n_actions))


@pytest.fixture
def modulo():
    """``test_modulo`` registered for the test only (as a plugin's module would register it)."""
    register_task("test_modulo", replace=True)(ModuloTask)
    yield
    TASKS._entries.pop("test_modulo", None)


@pytest.mark.parametrize("mode, advantage", [("sampled", "group_mean"), ("exact", "constant")])
def test_a_new_environment_composed_with_the_tabular_policy_trains(modulo, mode, advantage):
    cfg = RunConfig(task="test_modulo", task_kwargs={"mode": mode}, estimator="reinforce", advantage=advantage,
                    lr=0.3, steps=40, log_points=2)
    frame = train(cfg)
    first, last = frame[frame.step == frame.step.min()], frame[frame.step == frame.step.max()]
    assert first.error.tolist() == pytest.approx([2 / 3, 2 / 3])  # uniform over 3 actions at init
    assert (last.error < 0.2).all(), last.error.tolist()
    assert {"cos_pg", "cos_ce"} <= set(frame.columns)


def test_the_composed_task_groups_rewards_and_enumerates_as_its_environment_says(modulo):
    task = make_task("test_modulo", batch_size=4, samples_per_context=3)
    params = task.init_params(derived_generator(0, "init"))
    r = collect(task, params, 0, derived_generator(0, "roll"), 0)
    assert r.group.tolist() == [g for g in range(4) for _ in range(3)]  # the default: one group per draw
    assert torch.equal(r.rewards, (r.actions[..., 0] == r.obs % 3).to(r.rewards.dtype))
    exact = make_task("test_modulo", batch_size=4, mode="exact")
    r = collect(exact, exact.init_params(derived_generator(0, "init")), 0, derived_generator(0, "roll"), 0)
    assert r.actions[0, :, 0].tolist() == [0, 1, 2] * 4 and r.group.tolist() == [g for g in range(4) for _ in range(3)]
    torch.testing.assert_close(r.extras["weights"].sum((1, 2)), torch.ones(2))


@pytest.mark.parametrize("task, env_type, policy_type", [
    (Bandit(N=3, K=4, population=2, init_std=0.5), BanditEnv, TabularPolicy),
    (GaussianBandit(population=2, mu=1.5), GaussianBanditEnv, TabularPolicy),
    (MNIST(population=2, hidden=8), MNISTEnv, MLP),  # built without reading the images
], ids=["bandit", "gaussian_bandit", "mnist"])
def test_the_tasks_objects_satisfy_the_contracts(task, env_type, policy_type):
    assert isinstance(task.env, env_type) and isinstance(task.env, ContextualEnv)
    assert isinstance(task.policy, policy_type) and isinstance(task.policy, CategoricalPolicy)
    assert task.env.population == task.population and task.n_actions == task.env.n_actions


def test_bandit_env_and_tabular_policy_draw_in_the_tasks_order():
    """init: the correct arms, then the table, from one generator; the contexts, rows and rewards
    follow the contracts' shapes."""
    task = Bandit(N=3, K=4, population=2, init_std=0.5, batch_size=5)
    params = task.init_params(derived_generator(0, "init"))
    g = derived_generator(0, "init")
    labels = torch.randint(0, 4, (2, 3), generator=g)
    assert torch.equal(task.label_table, labels) and torch.equal(params[0], 0.5 * torch.randn(2, 3, 4, generator=g))
    contexts = task.env.sample_contexts(5, derived_generator(0, "ctx"))
    assert contexts.shape == (2, 5) and task.env.reward_table(contexts).shape == (2, 5, 4)
    assert torch.equal(task.env.wrong_labels(contexts), (task.env.labels(contexts) + 1) % 4)
    logits = task.policy.logits(params, task.env.features(contexts))
    assert torch.equal(logits, torch.stack([params[0][s, contexts[s]] for s in range(2)]))
    # the closed-form ‖∇ log π(a|x)‖² of the tabular policy is autograd's
    actions = torch.tensor([[0, 1, 2, 3, 0], [3, 2, 1, 0, 1]])
    leaf = params[0].clone().requires_grad_(True)
    logp = torch.log_softmax(task.policy.logits([leaf], contexts), -1).gather(-1, actions.unsqueeze(-1))[..., 0]
    for s, i in ((0, 1), (1, 4)):
        (g_row,) = torch.autograd.grad(logp[s, i], leaf, retain_graph=True)
        torch.testing.assert_close(task.policy.grad_sq_norms(params, contexts, actions)[s, i], g_row.pow(2).sum())


def test_a_policy_without_grad_norms_says_so():
    class Linear(CategoricalPolicy):
        def init(self, population, generator):
            return [torch.zeros(population, 2, 3)]

        def logits(self, params, features):
            return torch.einsum("snd,sdk->snk", features, params[0])

    with pytest.raises(ValueError, match="Linear does not provide per-sample gradient norms"):
        Linear().grad_sq_norms([torch.zeros(1, 2, 3)], torch.zeros(1, 4, 2), torch.zeros(1, 4, dtype=torch.long))
