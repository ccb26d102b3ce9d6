"""The contaminated-MNIST task: the MNIST contextual bandit of ``sandbox.envs.mnist`` × a
population MLP policy (``sandbox.policies.mlp``; shared/spec/environments.md, "Contaminated MNIST")."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.core.validation import check_choice, check_int
from sandbox.envs.mnist import SPLITS, MNISTEnv, check_data_dirs
from sandbox.frictions.base import FrictionStack
from sandbox.policies.mlp import MLP
from sandbox.tasks.base import Task, register_task
from sandbox.tasks.categorical import compose

BEHAVIOR = ("reported", "true")


@register_task("mnist")
@dataclass
class MNIST(Task):
    """The MNIST contextual bandit with an MLP policy per population member.

    mode='sampled': each step draws ``batch_size`` images per member and ``samples_per_context``
    actions per image. mode='exact': every action of every drawn image, weighted by μ(a|x)/B — the
    exact expected update of the estimator on the batch's images (infinitely many samples per
    image; baselines must be 'constant' or 'confidence'; only the actor-side frictions that change
    μ — logit noise, quantisation, ε-random — apply). behavior='true' hands the learner the
    probabilities the actor really sampled from (exact importance weights under actor bugs).
    ``probes``: estimators whose batch gradient, on the same batch at the same parameters, is
    compared with the PG and CE oracles at every logged step (with ``probe_advantage``).
    """

    label_reward = True  # R = 1[a = y] (what ``label_flip`` flips; ``RunConfig`` checks)
    default_advantage = "confidence"  # one sample per image by default: a group baseline would be 0

    batch_size: int = 100  # images per step (B)
    samples_per_context: int = 1  # samples per image
    population: int = 1  # seeds S, one batched model
    hidden: int = 100  # hidden units of the MLP
    split: str = "test10k"  # 'test10k' | 'full' | 'auto'
    train_size: int = 8000  # training part of the 10k split (the rest evaluates)
    eval_size: int = 2000  # evaluation images (a fixed subset; 0 = the whole evaluation split)
    data_dir: str | None = None  # an extra folder holding the IDX files
    download: bool = True  # fetch missing files from the public mirrors
    mode: str = "sampled"  # 'sampled' | 'exact'
    behavior: str = "reported"  # μ given to the learner: 'reported' | 'true'
    probes: tuple = ()  # estimator names probed on the same batch at logged steps
    probe_advantage: str = "confidence"
    policy: str = "mlp"  # a registered family that reads context vectors ('mlp' of ``hidden`` …)
    policy_kwargs: dict = field(default_factory=dict)  # its knobs, for a family other than 'mlp'
    objective: str = "plain"  # 'plain' | 'exact' (the same as mode='exact')
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, low=1)
        check_int("samples_per_context", self.samples_per_context, low=1)
        check_int("population", self.population, low=1)
        check_int("hidden", self.hidden, low=1)
        check_int("eval_size", self.eval_size, low=0)
        check_choice("behavior", self.behavior, BEHAVIOR)
        check_choice("split", self.split, SPLITS)
        check_int("train_size", self.train_size, low=1, high=9999)
        if self.data_dir is not None:
            check_data_dirs([self.data_dir])
        env = MNISTEnv(self.population, self.split, self.train_size, self.eval_size, self.data_dir, self.download)
        compose(self, env, "mlp", lambda: MLP(784, self.hidden, 10), tuple(self.probes), self.probe_advantage)

    def memory(self) -> tuple[int, int]:
        """The MLPs [S, 79,510 at hidden 100]; a step's pixels, hidden units and logits (×4: the
        actor's and the learner's passes and their gradients)."""
        rows = self.batch_size * self.samples_per_context * (10 if self.objective.enumerates else 1)
        params = self.policy.n_params if isinstance(self.policy, MLP) else 0  # another family: not known
        return 4 * self.population * params, 16 * self.population * rows * (784 + self.hidden + 10)

    def work(self) -> float:
        """2 FLOP per parameter and row for the actor's pass, 6 for the learner's (forward and backward)."""
        rows = self.batch_size * self.samples_per_context * (10 if self.objective.enumerates else 1)
        return 8.0 * self.population * rows * self.policy.n_params


__all__ = ["MNIST"]
