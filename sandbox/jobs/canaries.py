"""Canary evaluations: each component run once on a fixed, seeded, tiny input, hashed.

A canary exercises one component the way a job does, with tiny sizes and fixed seeds, on one CPU
thread: an estimator's loss, gradient and metrics on two toy batches (``toy_terms``); a baseline's
advantages; a controller's three steps; an optimiser's three steps; a delay schedule's delays and
admission; a task's (and a friction's) two learner steps of a tiny run through ``ActorLearner``
with a canary loss and baseline written here, so that a task's fingerprint does not move with any
registered estimator; the runtime's tiny stale runs. ``CANARIES[kind](name, settings, digest)``
feeds the outcome to ``digest`` and returns False where it cannot exercise the component (then
``sandbox.jobs.fingerprints`` falls back to its source file's bytes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from sandbox.core.terms import PGTerms
from sandbox.jobs.hashing import PORTABLE_BITS, Digests, feed, portable_bytes


# ----------------------------------------------------------------------------- toy batches
def toy_terms(per_token: bool = False, spread: float = 1.0, proximal: bool = False) -> PGTerms:
    """A seeded batch of 2 members × 6 sequences × 3 tokens in float64, some tokens masked, two
    groups per member; behaviour ``spread`` away from the learner (ratios well beyond clip ranges)."""
    g = torch.Generator().manual_seed(20260)
    P, B, T, K = 2, 6, 3, 5
    logits = torch.randn(P, B, T, K, generator=g, dtype=torch.float64)
    actions = torch.randint(0, K, (P, B, T), generator=g)

    def logp_of(z: Tensor) -> Tensor:
        return z.log_softmax(-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    logp = logp_of(logits).clone().requires_grad_(True)
    behavior = logp_of(logits + spread * torch.randn(logits.shape, generator=g, dtype=torch.float64))
    prox = logp_of(logits + 0.3 * spread * torch.randn(logits.shape, generator=g, dtype=torch.float64))
    target = logp_of(logits.flip(-1))
    advantages = torch.randn((P, B, T) if per_token else (P, B), generator=g, dtype=torch.float64)
    mask = torch.ones(P, B, T, dtype=torch.bool)
    mask[:, 1, 2] = False
    mask[:, 4, 1:] = False
    return PGTerms(logp=logp, advantages=advantages, mask=mask, behavior_logp=behavior,
                   proximal_logp=prox if proximal else None, group=torch.tensor([0, 0, 0, 1, 1, 1]),
                   target_logp=target, generator=torch.Generator().manual_seed(7))


def estimator_outcome(estimator, terms: PGTerms) -> dict:
    """Loss, its gradient w.r.t. log π and the metrics of ``estimator`` on ``terms``."""
    out = estimator(terms)
    (grad,) = torch.autograd.grad(out.loss, terms.logp, allow_unused=True)
    result = {"loss": out.loss, "grad": torch.zeros(()) if grad is None else grad, "metrics": dict(out.metrics)}
    if getattr(estimator, "screens_rows", False):
        result["keep"] = estimator.keep_mask(terms)
    return result


_CHECKED: set[type] = set()


def contract_breach(estimator) -> str:
    """What ``estimator`` does against the estimator contract on a toy batch (2 × 6 × 3 tokens,
    ``toy_terms``), '' if nothing: it returns an ``EstimatorOutput`` whose loss is a scalar tensor
    that depends on log π, and whose metrics are tensors."""
    from sandbox.core.terms import EstimatorOutput, TokenLoss
    from sandbox.estimators.base import Estimator

    terms = toy_terms()
    try:
        if isinstance(estimator, Estimator) and type(estimator).__call__ is Estimator.__call__:
            values = estimator.token_loss(terms)
            if not isinstance(values, (Tensor, TokenLoss)):
                return f"its token_loss returned a {type(values).__name__}, not a tensor [*P, B, T] of per-token losses"
        out = estimator(terms)
    except Exception as err:  # noqa: BLE001 — a wrong shape, a missing input …: the breach
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return f"it raised {type(err).__name__}: {first}"
    if not isinstance(out, EstimatorOutput):
        return f"it returned {type(out).__name__}, not an EstimatorOutput(loss, metrics)"
    if not isinstance(out.loss, Tensor):
        return f"its loss is a {type(out.loss).__name__}, not a tensor (the gradient is taken of it)"
    if out.loss.ndim != 0:
        return f"its loss has shape {tuple(out.loss.shape)}, not a scalar"
    if not out.loss.requires_grad:  # (a NaN loss is a divergence, a result: not a breach)
        return "its loss does not depend on logp (no gradient: detached, or built from numbers)"
    bad = [k for k, v in dict(out.metrics).items() if not isinstance(v, Tensor)]
    if bad:
        return f"its metrics {bad} are not tensors"
    return ""


def _texts(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(_texts, value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*map(_texts, value)) if value else set()
    return set()


def check_plugin_estimators(jobs: Iterable = ()) -> None:
    """Check each registered estimator that is not the sandbox's own (a plugin's) and that ``jobs``
    name (a text among their parameters) once on a toy batch, before any job runs: a breach of the
    contract is one ``ValueError`` line naming it, instead of a traceback per job."""
    from sandbox.estimators import ESTIMATORS

    named = set().union(*(_texts(job.params) for job in jobs)) if jobs else set()
    for name in sorted(named & set(ESTIMATORS.names())):
        cls = ESTIMATORS.get(name)
        if cls in _CHECKED or cls.__module__.split(".")[0] == "sandbox":
            continue
        try:
            estimator = ESTIMATORS.make(name)
        except (TypeError, ValueError):  # no defaults to build it with: its jobs will say
            continue
        breach = contract_breach(estimator)
        if breach:
            raise ValueError(f"plugin estimator {name!r} ({cls.__module__}.{cls.__qualname__}) breaks the estimator "
                             f"contract on a toy batch of 2 × 6 × 3 tokens: {breach}")
        _CHECKED.add(cls)


def _guarded(digest, label: str, fn: Callable[[], Any]) -> None:
    """Feed ``fn()``, or the type of the error it raises (a refusal is behaviour too)."""
    try:
        feed(digest, fn(), label)
    except (ValueError, TypeError, NotImplementedError) as err:
        feed(digest, type(err).__name__, label)


def off_values(component) -> list[tuple[str, Any]]:
    """Each numeric or flag field of ``component`` (a dataclass) moved off its value: a flag
    flipped, an integer plus one, a float halved (0 → 0.5, ±∞ → 1)."""
    out = []
    for f in dataclasses.fields(component):
        value = getattr(component, f.name)
        if not f.init or not isinstance(value, (bool, int, float)):
            continue
        if isinstance(value, bool):
            out.append((f.name, not value))
        elif isinstance(value, int):
            out.append((f.name, value + 1))
        else:
            out.append((f.name, 0.5 if value == 0 else 1.0 if math.isinf(value) else value / 2))
    return out


def _paths(digest, make: Callable, name: str, settings: dict, run: Callable) -> None:
    """Feed ``digest.paths`` (when the caller asks for it) with ``run(variant, digest, label)`` of
    the component with each field in turn off its value (``off_values``; one refused says so): a
    code path a numeric setting selects — DG's KL term, taken only when ``kl_coef`` > 0 — is then
    in its path fingerprint (``sandbox.jobs.fingerprints``; issue 46, R5)."""
    if getattr(digest, "paths", None) is None:
        return
    for field_name, value in off_values(make(name, **settings)):
        label = f"{field_name}={value!r}"
        try:
            variant = make(name, **{**settings, field_name: value})
        except (ValueError, TypeError) as err:
            feed(digest.paths, type(err).__name__, label)
            continue
        run(variant, digest.paths, label)


def _estimator(name: str, settings: dict, digest) -> bool:
    from sandbox.estimators import make_estimator

    estimator = make_estimator(name, **settings)
    for label, kw in (("a", {}), ("b", {"per_token": True, "spread": 0.3, "proximal": True})):
        _guarded(digest, label, lambda kw=kw: estimator_outcome(estimator, toy_terms(**kw)))
    _paths(digest, make_estimator, name, settings,
           lambda variant, into, label: _guarded(into, label, lambda: estimator_outcome(variant, toy_terms())))
    return True


def _advantage(name: str, settings: dict, digest) -> bool:
    from sandbox.advantages import make_advantage

    _advantage_outcome(make_advantage(name, **settings), digest, "")
    _paths(digest, make_advantage, name, settings, _advantage_outcome)
    return True


def _advantage_outcome(advantage, digest, prefix: str) -> None:
    g = torch.Generator().manual_seed(11)
    group = torch.tensor([[0, 0, 0, 1, 1, 1]] * 2)
    extras = {"probs": torch.rand(2, 6, 4, generator=g, dtype=torch.float64).softmax(-1),
              "rho": torch.rand(2, 6, generator=g, dtype=torch.float64) * 2,
              "grad_sq_norms": torch.rand(2, 6, generator=g, dtype=torch.float64),
              "mask": torch.rand(2, 6, 3, generator=g) > 0.2}
    needs = {k: v for k, v in extras.items() if k in advantage.needs}
    for label, rewards in (("binary", (torch.rand(2, 6, generator=g) > 0.5).to(torch.float64)),
                           ("real", torch.randn(2, 6, generator=g, dtype=torch.float64))):
        _guarded(digest, prefix + label, lambda rewards=rewards: advantage(rewards, group, **needs))


def _controller(name: str, settings: dict, digest) -> bool:
    from sandbox.controllers import make_controller

    _controller_outcome(make_controller(name, **settings), digest, "")
    _paths(digest, make_controller, name, settings, _controller_outcome)
    return True


def _controller_outcome(controller, digest, prefix: str) -> None:
    from sandbox.estimators.base import behavior_diagnostics

    terms = toy_terms()
    metrics = behavior_diagnostics(terms.logp.detach(), terms.behavior_logp, terms.valid)
    g = torch.Generator().manual_seed(5)
    for step in range(3):
        grads = [torch.randn(2, 3, generator=g, dtype=torch.float64), torch.randn(2, 2, 2, generator=g,
                                                                                  dtype=torch.float64)]
        _guarded(digest, f"{prefix}step{step}", lambda grads=grads: dataclasses.asdict(controller.step(grads, terms, metrics, (2,))))


def _optimizer(name: str, settings: dict, digest) -> bool:
    from sandbox.runtime.optim import PopulationOptimizer

    optimizer = PopulationOptimizer(name, lr=0.05)
    g = torch.Generator().manual_seed(3)
    params = [torch.randn(2, 4, generator=g, dtype=torch.float64), torch.randn(2, 3, generator=g, dtype=torch.float64)]
    for step in range(3):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params]
        optimizer.step(params, grads, (2,), torch.tensor([1.0, 0.5], dtype=torch.float64),
                       torch.tensor([True, step != 1]))
    feed(digest, params)
    return True


def _staleness(kind: str, settings: dict, digest) -> bool:
    from sandbox.core.rollout import Rollout
    from sandbox.frictions import DELAYS, DelaySchedule

    fields = {"kind": kind, **settings}
    if DELAYS.get(kind).delays:
        fields.setdefault("D", 3)
        fields.setdefault("n_actors", 2)
    paced = DelaySchedule.from_dict({**fields, "budget": 1})  # a budget: pacing, or what drop/mask admit
    schedule = paced if paced.rule.filters else DelaySchedule.from_dict(fields)
    for label, s in (("delays", schedule), ("paced", paced)):
        feed(digest, [[s.delay(step, seed) for step in range(24)] for seed in range(3)], label)
    version = torch.tensor([[[5, 5], [4, 6], [3, 3], [6, 6]]])
    rollout = Rollout(obs=None, actions=torch.zeros(1, 4, 2, dtype=torch.long), mask=torch.ones(1, 4, 2, dtype=torch.bool),
                      behavior_logp=torch.zeros(1, 4, 2), true_behavior_logp=torch.zeros(1, 4, 2),
                      rewards=torch.zeros(1, 4), group=torch.tensor([[0, 0, 1, 1]]), version=version)
    admitted, dropped = schedule.admit(rollout, 6)
    feed(digest, {"mask": admitted.mask, "dropped": dropped if dropped is not None else "none"}, "admit")
    return True


# ----------------------------------------------------------------------------- tiny runs
#: sizes of the canary runs (an integer field of a task takes min(its default, this))
TINY = {"N": 3, "K": 5, "batch_size": 8, "samples_per_context": 2, "population": 2, "hidden": 8,
        "train_size": 64, "eval_size": 32, "H": 3, "width": 16, "heads": 2, "layers": 1, "mlp": 32,
        "prompts_per_step": 3, "samples_per_prompt": 2, "eval_prompts": 4, "eval_samples": 2}
#: a friction's strength in its canary (its defaults are mostly "off")
STRENGTH = {"landmine": {"p_bug": 0.3}, "rare_discovery": {"p_disc": 0.3}, "logit_noise": {"sigma": 0.5},
            "eps_random": {"eps": 0.2}, "quantized": {"bits": 4}, "bernoulli_reward": {"p": 0.3},
            "gaussian_reward": {"sigma": 0.3}, "label_flip": {"p": 0.3}, "poison_token": {"token": 0, "penalty": 0.5},
            "partial_rollouts": {"chunks": 2}, "truncated_sampling": {"top_k": 2, "top_p": 0.8}}
#: tasks a friction's canary runs on: the first that takes it
FRICTION_TASKS = ("bandit", "reverse_copy")


def tiny_task_kwargs(task: str, settings: dict) -> dict:
    from sandbox.tasks import TASKS, load_tasks

    if task not in TASKS:
        load_tasks(task)
    kwargs = {}
    for f in dataclasses.fields(TASKS.get(task)):
        if f.name in TINY and isinstance(f.default, int) and not isinstance(f.default, bool):
            kwargs[f.name] = min(f.default, TINY[f.name])
        if f.name == "download":  # a canary never reaches the network
            kwargs[f.name] = False
    return {**kwargs, **settings}


class _CanaryLoss:
    """REINFORCE written here (not a registered estimator): −A·log π aggregated over valid tokens;
    it screens rows (keeps A ≥ 0) so that a screened task runs it too."""

    name, recomputes_proximal, needs_behavior, screens_rows, fits_target, batch_dependent = \
        "canary", False, False, True, False, False
    aggregation, kl_coef, rollout_is = "token-mean", 0.0, None

    def penalized_token_loss(self, terms: PGTerms):
        from sandbox.core.terms import TokenLoss

        return TokenLoss(-terms.token_advantages * terms.logp)

    def keep_mask(self, terms: PGTerms) -> Tensor:
        return terms.valid & (terms.token_advantages >= 0)

    def diagnostics(self, terms: PGTerms, out) -> dict:
        return {}

    def __call__(self, terms: PGTerms):
        from sandbox.core.terms import EstimatorOutput
        from sandbox.estimators.base import aggregate

        out = self.penalized_token_loss(terms)
        return EstimatorOutput(aggregate(out.values, terms.valid, self.aggregation).sum(), {})


def _canary_baseline():
    from sandbox.advantages import Advantage

    @dataclasses.dataclass(frozen=True)
    class CanaryBaseline(Advantage):
        """A = R − 1/2 (per context: exact enumeration takes it)."""

        per_context = True
        name = "canary"

        def compute(self, rewards, group, **extras):
            return rewards - 0.5

    return CanaryBaseline()


def tiny_run(digest, steps: int = 2, **fields: Any) -> None:
    """Two learner steps of the run ``fields`` (RunConfig fields) with the canary loss and baseline:
    every rollout tensor, the metrics, the final parameters and an evaluation."""
    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner

    config = RunConfig(**{"estimator": "reinforce", "advantage": "constant", "lr": 0.05, "seed": 3,
                          "steps": steps, "log_points": 2, **fields})
    learner = ActorLearner(config)
    learner.estimator, learner.advantage = _CanaryLoss(), _canary_baseline()
    for step in range(steps):
        if isinstance(digest, Digests):
            digest.floats = step == 0  # after the first Adam update: integers only (``Digests``)
        rollout = learner.rollout(step)
        feed(digest, {k: getattr(rollout, k) for k in ("actions", "mask", "behavior_logp", "true_behavior_logp",
                                                       "rewards", "version")}, f"rollout{step}")
        feed(digest, learner.update(step, rollout, diagnostics=step == steps - 1), f"metrics{step}")
        learner.publish(step + 1)
    feed(digest, {"params": learner.params, "evaluate": learner.evaluate(steps)}, "final")
    if isinstance(digest, Digests):
        digest.floats = True


def _task(name: str, settings: dict, digest) -> bool:
    tiny_run(digest, task=name, task_kwargs=tiny_task_kwargs(name, settings))
    return True


def _friction(name: str, settings: dict, digest) -> bool:
    from sandbox.frictions import FRICTIONS

    kwargs = {**STRENGTH.get(name, {}), **settings}
    friction = FRICTIONS.make(name, **kwargs)
    if not friction.active:
        return False
    staleness = {"kind": "fixed", "D": 1} if friction.resumes_versions else {}
    for task in FRICTION_TASKS:
        try:
            tiny_run(digest, task=task, task_kwargs=tiny_task_kwargs(task, {}), frictions=((name, kwargs),),
                     staleness=staleness)
            return True
        except ValueError:  # this task does not take the friction: the next one
            continue
    return False


def _runtime(name: str, settings: dict, digest) -> bool:
    task = {"task": "bandit", "task_kwargs": tiny_task_kwargs("bandit", {"init_std": 0.5})}
    tiny_run(digest, steps=3, **task, staleness={"kind": "fixed", "D": 2})
    tiny_run(digest, steps=3, **task, staleness={"kind": "uniform", "D": 2}, history="rollouts")
    tiny_run(digest, steps=2, **task, proximal="recompute")
    return True


#: kind → canary(name, settings, digest) → whether it exercised the component
CANARIES: dict[str, Callable[[str, dict, Any], bool]] = {
    "estimator": _estimator, "advantage": _advantage, "controller": _controller, "optimizer": _optimizer,
    "staleness": _staleness, "task": _task, "friction": _friction, "runtime": _runtime}

__all__ = ["CANARIES", "Digests", "PORTABLE_BITS", "STRENGTH", "TINY", "check_plugin_estimators", "contract_breach",
           "estimator_outcome", "feed", "off_values", "portable_bytes", "tiny_run", "toy_terms"]
