"""The deployment: the frictions a run meets, read from its configuration, and the battery of cells
built from them on the sequence and MNIST environments of a chosen battery (and its LM on Ray).

Cells (each only when the deployment has the friction; names carry the strength):

- ``reversal/deploy-control`` (and ``mnist/deploy-control`` where MNIST has friction cells) — the
  run's group size and nothing else (panel "deployment"): the score each environment's frictions
  are measured against;
- ``*/deploy-reuse-K`` — K optimiser updates per batch of rollouts (epochs × mini-batches): update i
  of every K sees rollouts i versions old, and π_old is the rollouts' own policy (what a trainer
  that recomputes π_old once per batch has), so the clip bounds the reuse (staleness);
- ``*/deploy-async-D`` — the async trainer's delays (staleness); ``reversal/deploy-top-p…`` —
  top-p/top-k with the log-probs the engine reports, under the run's delays (inference engine);
  ``reversal/deploy-partial-c`` — answers sampled in c chunks across versions; ``*/deploy-bf16`` —
  the sampler's parameters in bf16 (``--precision``);
- ``reversal/deploy-all`` — every friction at once (panel "deployment"), when there are two or more;
- ``llm/deploy-ray-stale-D`` — the tiny LM on Ray, rollout workers up to D versions behind, where
  the chosen battery has the LM environment and the run is asynchronous.

Every cell but the reuse ones takes the run's π_old (``proximal``: 'recompute' when the trainer
recomputes it, 'behavior' when it reuses the engine's log-probs), and every cell takes the run's
group size, keeping the samples per step of the chosen battery. The battery is versioned
(``TEMPLATE_VERSION``, its canonical hash recorded in ``sandbox/scoring/batteries/versions.py``).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from sandbox.scoring.battery import Battery, build

TEMPLATE_VERSION = 2  # 2: an MNIST control beside MNIST's friction cells
#: per task: the (groups per step, samples per group) knobs the run's group size sets
GROUP_KNOBS = {"reverse_copy": ("prompts_per_step", "samples_per_prompt"), "mnist": ("batch_size", "samples_per_context"),
               "hf_text": ("prompts_per_step", "samples_per_prompt")}
DEPLOY_ENVS = ("reversal", "mnist", "llm")
PROXIMALS = ("recompute", "behavior")
REPORTS = ("truncated", "full")


@dataclass(frozen=True)
class Deployment:
    """The frictions of one run (``sandbox.check.verl`` and ``sandbox.check.trl`` read them)."""

    group: int = 1  # samples per prompt (verl rollout.n, TRL num_generations)
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    report: str = "truncated"  # the engine's log-probs: 'truncated' (processed) or 'full' (raw)
    reuse: int = 1  # optimiser updates per batch of rollouts
    delay: dict = field(default_factory=dict)  # the async trainer's DelaySchedule ({}: synchronous)
    partial: int = 1  # chunks per answer (partial rollouts; 1: off)
    precision: str | None = None  # the sampler's dtype under a precision mismatch (None: off)
    proximal: str = "recompute"  # π_old: the trainer's own ('recompute') or the engine's μ ('behavior')

    def __post_init__(self) -> None:
        for name in ("group", "reuse", "partial"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"deployment {name} must be an integer ≥ 1, got {getattr(self, name)!r}")
        if self.proximal not in PROXIMALS or self.report not in REPORTS:
            raise ValueError(f"deployment proximal must be one of {PROXIMALS} and report one of {REPORTS}")

    def replace(self, **changes) -> Deployment:
        return dataclasses.replace(self, **changes)

    @property
    def max_delay(self) -> int:
        from sandbox.frictions.staleness import DelaySchedule

        return DelaySchedule.from_dict(self.delay).delay_stage.maximum

    @property
    def truncates(self) -> bool:
        return self.top_p < 1 or self.top_k > 0

    def frictions(self) -> list[str]:
        """The frictions this deployment has, in cell order."""
        on = {"reuse": self.reuse > 1, "async": self.max_delay > 0, "top-p": self.truncates,
              "partial": self.partial > 1 and self.max_delay > 0, "precision": self.precision is not None}
        return [name for name, active in on.items() if active]


def _grouped(env: dict, group: int) -> dict:
    """The environment with the run's group size, keeping its samples per step."""
    from sandbox.tasks import TASKS, load_tasks

    env = copy.deepcopy(env)
    run = env.setdefault("run", {})
    load_tasks()
    knobs = GROUP_KNOBS.get(run.get("task"))
    if knobs is None:
        return env
    defaults = {f.name: f.default for f in dataclasses.fields(TASKS.get(run["task"]))}
    kwargs = run.setdefault("task_kwargs", {})
    outer, inner = (kwargs.get(k, defaults[k]) for k in knobs)
    kwargs.update({knobs[0]: max(1, outer * inner // group), knobs[1]: group})
    return env


def _cells(dep: Deployment, envs: set[str]) -> list[dict]:
    delay, prox = dict(dep.delay), {"proximal": dep.proximal}
    truncation = ["truncated_sampling", {"top_p": dep.top_p, "top_k": dep.top_k, "report": dep.report}]
    reuse = {"kind": "per_actor", "n_actors": dep.reuse, "D": dep.reuse}
    on_mnist = ["reversal"] + (["mnist"] if "mnist" in envs else [])
    history = {"reversal": {}, "mnist": {"history": "rollouts"}}
    mnist_cells = dep.reuse > 1 or dep.max_delay > 0 or dep.precision is not None
    cells = [{"name": f"{e}/deploy-control", "env": e, "friction": "deployment", "run": dict(prox)}
             for e in on_mnist if e == "reversal" or mnist_cells]
    if dep.reuse > 1:
        cells += [{"name": f"{e}/deploy-reuse-K{dep.reuse}", "env": e, "friction": "staleness",
                   "run": {"staleness": reuse, "proximal": "behavior", **history[e]}} for e in on_mnist]
    if dep.max_delay > 0:
        cells += [{"name": f"{e}/deploy-async-D{dep.max_delay}", "env": e, "friction": "staleness",
                   "run": {"staleness": delay, **prox, **history[e]}} for e in on_mnist]
    if dep.truncates:
        cells.append({"name": f"reversal/deploy-top-p{dep.top_p:g}-k{dep.top_k}-{dep.report}", "env": "reversal",
                      "friction": "inference engine", "run": {"staleness": delay, "frictions": [truncation], **prox}})
    if "partial" in dep.frictions():
        cells.append({"name": f"reversal/deploy-partial-{dep.partial}", "env": "reversal", "friction": "inference engine",
                      "run": {"staleness": delay, "history": "params", **prox,
                              "frictions": [["partial_rollouts", {"chunks": dep.partial}]]}})
    if dep.precision is not None:
        mismatch = ["precision_mismatch", {"sampler_dtype": dep.precision}]
        cells += [{"name": f"{e}/deploy-{dep.precision}", "env": e, "friction": "inference engine",
                   "run": {"frictions": [mismatch], **prox}} for e in on_mnist]
    if len(dep.frictions()) >= 2:
        everything = [f for f, on in ((truncation, dep.truncates),
                                      (["partial_rollouts", {"chunks": dep.partial}], "partial" in dep.frictions()),
                                      (["precision_mismatch", {"sampler_dtype": dep.precision}], dep.precision))
                      if on]
        stale = delay or (reuse if dep.reuse > 1 else {})
        cells.append({"name": "reversal/deploy-all", "env": "reversal", "friction": "deployment",
                      "run": {"staleness": stale, "history": "params", "frictions": everything, **prox}})
    if "llm" in envs and dep.max_delay > 0:
        cells.append({"name": f"llm/deploy-ray-stale-{dep.max_delay}", "env": "llm", "friction": "staleness",
                      "run": {"staleness": {"kind": "fixed", "D": dep.max_delay}}, "async": {"n_workers": 1}})
    return cells


def deployment_battery(dep: Deployment, battery: Battery) -> Battery:
    """The deployment's cells on ``battery``'s environments (budgets, seeds, metrics): its
    ``reversal`` environment is required, ``mnist`` and ``llm`` are used where present."""
    envs = battery.definition.get("envs", {})
    if "reversal" not in envs:
        raise ValueError(f"battery {battery.name!r} has no 'reversal' environment: the deployment cells need the "
                         f"sequence task (its environments: {sorted(envs)})")
    chosen = {name: _grouped(envs[name], dep.group) for name in DEPLOY_ENVS if name in envs}
    description = (f"the frictions of one deployment ({', '.join(dep.frictions()) or 'none'}; group {dep.group}, "
                   f"π_old {dep.proximal}) on the environments of {battery.name} v{battery.version}")
    return build({"name": "deployment", "version": TEMPLATE_VERSION, "seed": battery.seed,
                  "description": description, "envs": chosen, "cells": _cells(dep, set(chosen))})


#: the deployment whose battery on ``quick`` has every cell: its hash is the template's record
CANONICAL = Deployment(group=8, top_p=0.9, report="full", reuse=2, delay={"kind": "uniform", "D": 4}, partial=2,
                       precision="bfloat16")
