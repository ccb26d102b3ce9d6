"""The actor-learner loop (DESIGN.md, data flow):

    env → actor (stale, buggy policy copy) → frictions → rollout → advantages → estimator
        → controller → optimiser

``ActorLearner`` holds the pieces of one run and exposes the two halves — ``rollout(step)`` (the
actor, with the parameters of step t − d_t) and ``update(step, rollout)`` (the learner) — so that
the simulated loop here and the Ray runtime drive the same code. ``train(config)`` runs the loop and
returns a tidy frame: one row per (logged step, population member).

Divergence is a numerical event of one seed: a member whose rollout (rewards, behaviour
log-probs), gradient or parameters become NaN/inf is frozen at its last finite parameters and
marked ``diverged``, while the other members go on; when every member has diverged the run stops
early. A diverged run is a result, not an error: sweeps go on. An invalid config is an error,
raised (never recorded as a divergence).

On an accelerator (``RunConfig.device``) a step never waits for the device: divergence is handled
by masks on the device (the same numbers the CPU's branches give), the run stops early only when
a log point finds every member diverged, and what diverged is logged at log points.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from sandbox.controllers import flatten_grads, unflatten_grads
from sandbox.core.rollout import Rollout
from sandbox.core.seeding import derived_generator
from sandbox.core.terms import EstimatorOutput, PGTerms
from sandbox.core.validation import on_host
from sandbox.diagnostics import cosine, token_entropy
from sandbox.runtime.actor import collect
from sandbox.runtime.build import build
from sandbox.runtime.config import RunConfig
from sandbox.runtime.frames import config_columns, labelled, metrics_only  # noqa: F401 (here for their callers)
from sandbox.runtime.history import ParameterHistory, RolloutQueue
from sandbox.runtime.learner import learner_loss, learner_terms

log = logging.getLogger(__name__)


def log_schedule(steps: int, points: int) -> list[int]:
    """Steps 0 and ``steps`` plus ``points`` logarithmically spaced steps in between."""
    if steps == 0:
        return [0]
    inner = np.unique(np.round(np.geomspace(1, steps, num=max(points, 2))).astype(int))
    return sorted({0, steps, *inner.tolist()})


class ActorLearner:
    """Everything one run needs, built from its config."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.device = run_device(config)
        built = build(config)  # the one place a run's components are made
        self.task, self.frictions = built.task, built.frictions  # frictions: delay → … → admission
        self.task.device = self.device
        self.estimator, self.advantage, self.controllers = built.estimator, built.advantage, built.controllers
        self.optimizer = built.optimizer
        self.population = int(self.task.population)
        self.recompute_proximal = config.proximal == "recompute" or (
            config.proximal == "auto" and self.estimator.recomputes_proximal
        )
        self.params: list[Tensor] = [
            p.to(self.device).requires_grad_(True) for p in self.task.init_params(derived_generator(config.seed, "init"))
        ]
        self.active = torch.ones(self.population, dtype=torch.bool, device=self.device)
        self.diverged = torch.zeros(self.population, dtype=torch.bool, device=self.device)
        self._logged_diverged = torch.zeros(self.population, dtype=torch.bool)  # on the host, at log points
        self._previous_grad: Tensor | None = None  # raw estimator gradient of the last step
        self._previous_update: Tensor | None = None  # last applied update (after controllers)
        self.admission = self.frictions.ledger(self.population, self.device)  # the admission rule's accounting
        self.rows: list[pd.DataFrame] = []  # logged rows so far
        self.pending: dict[str, Tensor] = {}  # metrics of the last update, logged at the next logged step
        self.next_step, self.elapsed = 0, 0.0
        if config.history == "params":
            self.history: ParameterHistory | None = ParameterHistory(self.frictions.max_delay + 1)
            self.history.push(0, self.params)
            self.queue: RolloutQueue | None = None
        else:
            self.history = None
            self.queue = RolloutQueue(self.frictions, config.seed, config.steps)
            self.queue.fill(0, self._sample_current)

    # ------------------------------------------------------------------ actor
    def _sample(self, actor_params: Sequence[Tensor], step: int, version: int, **versions) -> Rollout:
        gen = derived_generator(self.config.seed, "rollout", step)
        return collect(self.task, actor_params, version, gen, self.config.seed, **versions)

    def _sample_current(self, step: int) -> Rollout:
        return self._sample([p.detach() for p in self.params], step, step - self.frictions.delay(step, self.config.seed))

    def rollout(self, step: int) -> Rollout:
        """The batch the learner consumes at ``step``, sampled with the parameters of step − d_t."""
        if self.queue is not None:
            return self.queue.pop(step)
        version = step - self.frictions.delay(step, self.config.seed)
        return self._sample(self.history.get(version), step, version, params_of=self.history.get, latest=step)

    # ------------------------------------------------------------------ learner
    def update(self, step: int, rollout: Rollout, diagnostics: bool = False) -> dict[str, Tensor]:
        """One learner step on ``rollout``, admit → loss → guard → control → step; returns
        per-member metrics ``[S]``."""
        rollout, waiting, dropped_frac = self.admit(step, rollout)
        if rollout is None:  # every member waits: no loss, no optimiser step
            return {"prompts_dropped_frac": dropped_frac}
        terms, out, grads = self.loss(step, rollout)
        flat, grad_norm = self.guard(grads)
        metrics = self._gradient_metrics(step, rollout, out.metrics, flat, grad_norm, diagnostics)
        if dropped_frac is not None:
            metrics["prompts_dropped_frac"] = dropped_frac
        grads, lr_scale, skip = self.control(flat, grads, terms, metrics, waiting)
        self.step(grads, lr_scale, skip)
        return metrics

    def admit(self, step: int, rollout: Rollout) -> tuple[Rollout | None, Tensor, Tensor | None]:
        """Quarantine diverged members' rows, then the schedule's admission rule with its running
        accounting (``sandbox.frictions.admissions.AdmissionLedger``): (the rollout to learn from —
        None when every member waits —, the members that wait ``[S]``, the running fraction of
        prompts dropped ``[S]`` or None when the rule filters nothing)."""
        return self.admission.admit(self._quarantine(rollout), step)

    def loss(self, step: int, rollout: Rollout) -> tuple[PGTerms, EstimatorOutput, list[Tensor]]:
        """The estimator's loss on ``rollout`` (the one learner call) and its gradient per parameter
        (zeros for a parameter the loss does not use)."""
        terms, out = learner_loss(self.task, self.estimator, self.params, rollout, self.advantage,
                                  derived_generator(self.config.seed, "estimator", step), self.recompute_proximal)
        grads = list(torch.autograd.grad(out.loss, self.params, allow_unused=True))
        return terms, out, [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, grads)]

    def guard(self, grads: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """The flat gradient ``[S, n]`` and its norm ``[S]``; a member whose gradient holds a NaN or
        inf has diverged: it is frozen and its gradient zeroed, so the others' update goes on."""
        flat = flatten_grads(grads, (self.population,))
        grad_norm = flat.norm(dim=-1)
        finite = torch.isfinite(grad_norm)  # a NaN or inf anywhere in a member's gradient shows in its norm
        if _maybe(~finite):
            self._mark_diverged(~finite)
            flat = torch.where(finite.unsqueeze(-1), flat, torch.zeros_like(flat))
            grad_norm = torch.where(finite, grad_norm, torch.zeros_like(grad_norm))
        return flat, grad_norm

    def _gradient_metrics(self, step: int, rollout: Rollout, estimator_metrics: dict[str, Tensor], flat: Tensor,
                          grad_norm: Tensor, diagnostics: bool) -> dict[str, Tensor]:
        """The estimator's metrics, the gradient's norm and cosine to the last one, the rollout's
        staleness and (with ``diagnostics``) the task's update diagnostics, each ``[S]``."""
        S = self.population
        metrics: dict[str, Tensor] = {k: v.detach().reshape(-1).expand(S) for k, v in estimator_metrics.items()}
        metrics["grad_norm"] = grad_norm
        metrics["cos_consecutive"] = (
            cosine(flat, self._previous_grad) if self._previous_grad is not None
            else torch.full((S,), math.nan, device=self.device)
        )
        self._previous_grad = flat.detach().clone()
        staleness = (step - rollout.version).to(torch.float64).reshape(S, -1)
        metrics["staleness_mean"], metrics["staleness_max"] = staleness.mean(-1), staleness.amax(-1)
        if diagnostics:
            logits = self.task.token_logits(self.params, rollout)
            if logits is not None:
                metrics["entropy"] = token_entropy(logits, rollout.mask)
            with torch.enable_grad():
                metrics.update(self.task.update_diagnostics(
                    self.params, rollout, flat,
                    terms_of=lambda params, r, advantage: learner_terms(self.task, params, r, advantage, None, False)))
        return metrics

    def control(self, flat: Tensor, grads: list[Tensor], terms: PGTerms, metrics: dict[str, Tensor],
                waiting: Tensor) -> tuple[list[Tensor], Tensor, Tensor]:
        """The controllers in order on the guarded gradient ``flat``: (the gradient to apply, its
        learning-rate scale ``[S]``, the members that skip the step ``[S]``); their metrics and the
        applied update's norm and cosine to the last applied one go into ``metrics``."""
        S = self.population
        grads = unflatten_grads(flat, grads)
        lr_scale = torch.ones(S, dtype=flat.dtype, device=self.device)
        skip = waiting
        for controller in self.controllers:
            ctrl = controller.step(grads, terms, metrics, population_shape=(S,))
            grads, lr_scale, skip = ctrl.grads, lr_scale * ctrl.lr_scale, skip | ctrl.skip
            metrics.update({k: v.detach().reshape(-1).expand(S) for k, v in ctrl.metrics.items()})
        applied = flatten_grads(grads, (S,)) * lr_scale.unsqueeze(-1)
        metrics["update_norm"] = applied.norm(dim=-1)
        metrics["cos_consecutive_update"] = (
            cosine(applied, self._previous_update) if self._previous_update is not None
            else torch.full((S,), math.nan, device=self.device)
        )
        self._previous_update = torch.where(skip.unsqueeze(-1), self._previous_update, applied) \
            if self._previous_update is not None else applied.detach().clone()
        return grads, lr_scale, skip

    def step(self, grads: Sequence[Tensor], lr_scale: Tensor, skip: Tensor) -> None:
        """The optimiser step of the active members that do not skip; a member whose parameters
        become non-finite is put back to its parameters before the step and frozen."""
        S = self.population
        before = [p.detach().clone() for p in self.params]
        self.optimizer.step(self.params, grads, (S,), lr_scale, self.active & ~skip)
        bad = ~torch.isfinite(sum(p.detach().reshape(S, -1).sum(-1) for p in self.params))
        if _maybe(bad):  # a member's parameter sum is non-finite iff an entry is (or it overflowed)
            with torch.no_grad():
                for p, b in zip(self.params, before):
                    p.copy_(torch.where(bad.reshape(S, *([1] * (p.ndim - 1))), b, p))
            self._mark_diverged(bad)

    def _quarantine(self, rollout: Rollout) -> Rollout:
        """A member whose rollout holds a non-finite reward or behaviour log-prob has diverged: it
        is frozen and its rows are zeroed so that the other members' update goes on."""
        S = self.population
        finite = torch.isfinite(rollout.rewards.reshape(S, -1)).all(-1) & \
            ~torch.isnan(rollout.behavior_logp.reshape(S, -1)).any(-1)
        if not _maybe(~finite):
            return rollout
        self._mark_diverged(~finite)
        keep = finite.reshape(S, *([1] * (rollout.rewards.ndim - 1)))
        keep_tokens = finite.reshape(S, *([1] * (rollout.behavior_logp.ndim - 1)))
        return rollout.replace(rewards=torch.where(keep, rollout.rewards, torch.zeros_like(rollout.rewards)),
                               behavior_logp=torch.where(keep_tokens, rollout.behavior_logp,
                                                         torch.zeros_like(rollout.behavior_logp)))

    def _mark_diverged(self, members: Tensor) -> None:
        """Freeze ``members`` (on the device; logged at the next log point, ``_row``)."""
        self.diverged |= members
        self.active &= ~members

    def publish(self, version: int) -> None:
        """Publish the parameters of ``version`` to the stale actors: into ``history`` (the ring of
        versions they sample with, which a distributed runtime sends on) or, with
        ``history='rollouts'``, by sampling now the rollouts due at this version."""
        if self.history is not None:
            self.history.push(version, self.params)
        else:
            self.queue.fill(version, self._sample_current)

    after_update = publish  # the name before the learner offered ``publish``

    def evaluate(self, step: int) -> dict[str, Tensor]:
        with torch.no_grad():
            metrics = self.task.evaluate(self.params, derived_generator(self.config.seed, "eval", step))
        return {k: torch.where(self.diverged, torch.full_like(v, math.nan), v) if v.is_floating_point() else v
                for k, v in metrics.items()}

    # ------------------------------------------------------------------ the loop
    def run(self, progress: bool = False, rollouts: Callable[[int], Rollout] | None = None,
            publish: Callable[[int], None] | None = None, checkpoint_path: str | os.PathLike | None = None,
            checkpoint_every: int = 0) -> pd.DataFrame:
        """Run (or continue) the loop to ``config.steps``.

        ``rollouts(step)`` supplies the batch of each step (default: the simulated stale actor,
        ``self.rollout``); ``publish(version)`` is called after each update, with ``next_step``
        already ``version`` (default: ``self.publish``). With ``checkpoint_path`` the whole state is
        saved atomically every ``checkpoint_every`` steps; ``ActorLearner.resume(path)`` continues it
        with the same numbers.
        """
        cfg = self.config
        rollouts = rollouts or self.rollout
        publish = publish or self.publish
        schedule = set(log_schedule(cfg.steps, cfg.log_points))
        start = time.perf_counter() - self.elapsed
        bar = tqdm(total=cfg.steps, initial=self.next_step, desc=cfg.label or cfg.estimator, disable=not progress,
                   leave=False)
        step = self.next_step
        while True:
            if step in schedule and (not self.rows or self.rows[-1]["step"].iloc[0] != step):
                self.rows.append(self._row(step, {**self.evaluate(step), **self.pending}, time.perf_counter() - start))
            if step == cfg.steps or (step in schedule or on_host(self.active)) and not bool(self.active.any()):
                break
            self.pending = self.update(step, rollouts(step), diagnostics=(step + 1) in schedule)
            step += 1
            self.next_step, self.elapsed = step, time.perf_counter() - start
            publish(step)
            bar.update(1)
            if checkpoint_path is not None and checkpoint_every and step % checkpoint_every == 0 and step < cfg.steps:
                self.save(checkpoint_path)
        bar.close()
        if not self.rows or self.rows[-1]["step"].iloc[0] != step:
            self.rows.append(self._row(step, {**self.evaluate(step), **self.pending}, time.perf_counter() - start))
        frame = pd.concat(self.rows, ignore_index=True)
        frame["completed_steps"] = step
        return frame

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        return {
            "config": self.config.to_dict(),
            "params": [p.detach().clone() for p in self.params],
            "optimizer": self.optimizer.state_dict(),
            "controllers": [c.state_dict() for c in self.controllers],
            "active": self.active.clone(), "diverged": self.diverged.clone(),
            "previous_grad": self._previous_grad, "previous_update": self._previous_update,
            "admission": self.admission.state,
            "history": None if self.history is None else self.history.state_dict(),
            "queue": None if self.queue is None else self.queue.state_dict(),
            "task_state": self.task.state_dict(),
            "rows": self.rows, "pending": self.pending, "next_step": self.next_step, "elapsed": self.elapsed,
        }

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            for p, saved in zip(self.params, state["params"]):
                p.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        for controller, saved in zip(self.controllers, state["controllers"]):
            controller.load_state_dict(saved)
        self.active, self.diverged = state["active"], state["diverged"]
        self._previous_grad, self._previous_update = state["previous_grad"], state["previous_update"]
        if "admission" in state:
            self.admission.load(state["admission"])
        if state["history"] is not None:
            self.history.load_state_dict(state["history"])
        if state["queue"] is not None:
            self.queue.load_state_dict(state["queue"])
        self.task.load_state_dict(state["task_state"] or {})
        self.rows, self.pending = state["rows"], state["pending"]
        self.next_step, self.elapsed = state["next_step"], state["elapsed"]

    def save(self, path: str | os.PathLike, **extra) -> None:
        """Atomically write the whole state, with a runtime's ``extra`` entries (write to a
        temporary file, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save({**self.state_dict(), **extra}, tmp)
        os.replace(tmp, path)

    @classmethod
    def resume(cls, path: str | os.PathLike) -> ActorLearner:
        state = torch.load(path, weights_only=False)
        learner = cls(RunConfig.from_dict(state["config"]))
        learner.load_state_dict(state)
        return learner

    def _row(self, step: int, metrics: dict[str, Tensor], wall: float) -> pd.DataFrame:
        S = self.population
        diverged = self.diverged.cpu().clone()  # not a view of the live tensor (on the CPU .cpu() is the same one)
        newly = diverged & ~self._logged_diverged
        if bool(newly.any()):
            log.info("members %s diverged", torch.nonzero(newly).flatten().tolist())
        self._logged_diverged = diverged
        data = {"step": np.full(S, step), "member": np.arange(S), "seed": np.full(S, self.config.seed),
                "diverged": diverged.numpy().copy(), "wall_time": np.full(S, wall)}
        for key, value in metrics.items():
            data[key] = value.detach().to(torch.float64).reshape(S).cpu().numpy().copy()
        return pd.DataFrame(data)


def _maybe(flags: Tensor) -> bool:
    """Whether any of ``flags`` may be set: asked of the host for CPU tensors; on an accelerator
    always True, so the masked path (exact whatever the flags) runs without waiting for the device."""
    return bool(flags.any()) if on_host(flags) else True


def run_device(config: RunConfig) -> torch.device:
    """The run's device, refused in one line when this machine has none such or its task cannot use it."""
    device = torch.device(config.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r}: torch.cuda.is_available() is False on this machine")
    return device


def train(config: RunConfig, progress: bool = False) -> pd.DataFrame:
    """Run ``config`` and return one row per (logged step, member) with its metrics and, as columns,
    every config field (so analyses select runs by field, never by parsing labels)."""
    return labelled(ActorLearner(config).run(progress=progress), config)
