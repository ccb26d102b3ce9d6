"""The contaminated-MNIST task: the MNIST contextual bandit of ``sandbox.envs.mnist`` with a
population MLP policy (shared/spec/environments.md, "Contaminated MNIST")."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sandbox.advantages import make_advantage
from sandbox.core.validation import check_choice, check_int
from sandbox.diagnostics import cosine
from sandbox.envs.mnist import SPLITS, MNISTData, check_data_dirs, mnist_data
from sandbox.estimators import make_estimator
from sandbox.frictions.base import FrictionStack
from sandbox.objectives import MODES
from sandbox.policies.mlp import MLP
from sandbox.tasks.base import Batch, register_task
from sandbox.tasks.categorical import CategoricalTask, flat_grad

BEHAVIOR = ("reported", "true")


@register_task("mnist")
@dataclass
class MNIST(CategoricalTask):
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
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, low=1)
        check_int("samples_per_context", self.samples_per_context, low=1)
        check_int("population", self.population, low=1)
        check_int("hidden", self.hidden, low=1)
        check_int("eval_size", self.eval_size, low=0)
        check_choice("mode", self.mode, tuple(MODES))
        self.objective = MODES[self.mode]
        check_choice("behavior", self.behavior, BEHAVIOR)
        check_choice("split", self.split, SPLITS)
        check_int("train_size", self.train_size, low=1, high=9999)
        if self.data_dir is not None:
            check_data_dirs([self.data_dir])
        self._probes = [make_estimator(name) for name in self.probes]
        self._probe_advantage = make_advantage(self.probe_advantage)
        self.n_actions = 10
        self.policy = MLP(784, self.hidden, 10)

    @functools.cached_property
    def data(self) -> MNISTData:
        """The images, read on first use: constructing the task (to validate a config) stays cheap."""
        return mnist_data(self.split, self.train_size, self.data_dir, self.download)

    @property
    def eval_x(self) -> Tensor:
        n = self.data.eval_x.shape[0] if self.eval_size == 0 else min(self.eval_size, self.data.eval_x.shape[0])
        return self.data.eval_x[:n]

    @property
    def eval_y(self) -> Tensor:
        return self.data.eval_y[: self.eval_x.shape[0]]

    # ------------------------------------------------------------------ environment
    def memory(self) -> tuple[int, int]:
        """The MLPs [S, 79,510 at hidden 100]; a step's pixels, hidden units and logits (×4: the
        actor's and the learner's passes and their gradients)."""
        rows = self.batch_size * self.samples_per_context * (10 if self.objective.enumerates else 1)
        return 4 * self.population * self.policy.n_params, 16 * self.population * rows * (784 + self.hidden + 10)

    def init_params(self, generator):
        _ = self.data  # read the images (or report them missing) before the first step, not during it
        return self.policy.init(self.population, generator)

    def sample_contexts(self, n, generator):
        return torch.randint(0, self.data.train_x.shape[0], (self.population, n), generator=generator)

    def labels(self, contexts):
        return self.data.train_y[contexts]

    def images(self, contexts: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """``[S, n, 784]`` pixels of image ids ``[S, n]``."""
        flat = self.data.train_x.index_select(0, contexts.reshape(-1))  # several times faster than x[contexts]
        return flat.view(*contexts.shape, flat.shape[-1]).to(dtype)

    def logits(self, params, contexts):
        """``[S, R, 10]``. Rows come in runs of one image (its samples, or its enumerated actions):
        the MLP runs once per image and its logits are repeated (the runs are checked first)."""
        r = self.n_actions if self.objective.enumerates else self.samples_per_context
        if r > 1 and contexts.shape[-1] % r == 0:
            distinct = contexts[..., ::r]
            if torch.equal(distinct.repeat_interleave(r, -1), contexts):
                return self.policy.logits(params, self.images(distinct, params[0].dtype)).repeat_interleave(r, -2)
        return self.policy.logits(params, self.images(contexts, params[0].dtype))

    def per_sample_grad_sq_norms(self, params, contexts, actions):
        return self.policy.grad_sq_norms(params, self.images(contexts, params[0].dtype), actions)

    # ------------------------------------------------------------------ actor and learner
    def draw_batch(self, generator):
        if not self.objective.enumerates:
            return super().draw_batch(generator)
        images = self.sample_contexts(self.batch_size, generator)  # every action of each image is enumerated
        return Batch(obs=images, rows=images, group=torch.arange(self.batch_size))

    def learner_rollout(self, rollout):
        if self.behavior == "true":
            return rollout.replace(behavior_logp=rollout.true_behavior_logp)
        return rollout

    # ------------------------------------------------------------------ evaluation and oracles
    def evaluate(self, params, generator):
        """Greedy test error on the evaluation images, and the size of the training set used."""
        logits = self.policy.logits([p.detach() for p in params], self.eval_x.to(params[0].dtype))
        error = (logits.argmax(-1) != self.eval_y).to(torch.float32).mean(-1)
        return {"error": error, "train_images": torch.full_like(error, float(self.data.train_x.shape[0]))}

    def oracle_contexts(self, rollout):
        rows = self.n_actions if self.objective.enumerates else self.samples_per_context
        return rollout.obs[:, ::rows]

    def update_diagnostics(self, params, rollout, grad, estimator, terms_of=None):
        """cos of the update to the exact PG oracle and to the CE oracle on the batch's images
        (misalignment = 1 − cos); for each probe, the same cosines of its batch gradient."""
        oracles = self.oracle_directions(params, self.oracle_contexts(rollout))
        metrics = {f"cos_{name}": cosine(-grad, d) for name, d in oracles.items()}
        for probe in self._probes:
            leaves = [p.detach().requires_grad_(True) for p in params]
            terms = terms_of(leaves, rollout, self._probe_advantage)
            g = flat_grad(self.objective(probe, terms, rollout, leaves).loss, leaves, self.population)
            for name, d in oracles.items():
                metrics[f"probe_{probe.name}_cos_{name}"] = cosine(-g, d)
        return metrics


__all__ = ["MNIST"]
