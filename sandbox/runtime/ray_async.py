"""Real asynchrony on Ray: rollout workers, a learner, the run's own staleness.

N rollout workers (Ray actors, each with its own copy of the task and policy) sample batches while
the learner (this process, an ``ActorLearner`` that this runner drives, never subclasses) updates.
Every token is stamped with the learner version that produced it, so staleness is measured per
token.

The staleness is the run's own: the delay schedule of ``RunConfig.staleness`` (its delay kind,
admission rule and broadcast period k: ``sandbox.frictions.staleness``), the same object the
simulated loop realises. The learner ``publish``es each version into its ``history``; this runner
sends every k-th to the workers through the object store, and starts the rollout of step t only
when the version the schedule gives it, v_t = t − s_t, is published — nothing is sampled that would
have to be dropped — and the learner admits what the schedule admits. Realised staleness is
therefore the simulated loop's, bit for bit, for every delay kind and k (and so is every number):
``tests/runtime/test_ray_staleness.py``.

``AsyncConfig.mode`` and ``AsyncConfig.broadcast_every`` are kept for older callers and mapped onto
the schedule (``schedule_for``): ``broadcast_every=k`` is ``staleness.broadcast_every=k``;
``mode='bounded'`` is the schedule's own bound (its 'pace' admission), so it refuses an admission
rule that filters instead; a contradiction raises one ``ValueError`` line.

Faults: a worker that dies is restarted and its step re-sampled; since a rollout's randomness
derives from (seed, step), the replacement is identical — no rollout is lost or counted twice.
The runner checkpoints the learner (``checkpoint_every``) with the runtime's counters, and
``resume=True`` continues from the last one — only the same run (same config, or more ``steps``),
else ValueError.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from sandbox.core.processes import start_ray, stop_ray
from sandbox.core.rollout import Rollout
from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_choice, check_range
from sandbox.frictions import DelaySchedule
from sandbox.runtime.actor import collect, require_versions
from sandbox.runtime.build import build, build_frictions
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, labelled

log = logging.getLogger(__name__)

MODES = ("fixed_lag", "bounded")


@dataclass(frozen=True)
class AsyncConfig:
    """How the actor-learner is distributed; the run itself, its staleness included, is a
    ``RunConfig`` (``RunConfig.staleness``: one knob for the simulated and the Ray runtimes).

    Attributes:
        n_workers: rollout workers (Ray actors), ≥ 1.
        mode: 'fixed_lag' or 'bounded' (kept for older callers: both realise the schedule;
            'bounded' insists that its admission paces rather than filters, ``schedule_for``).
        broadcast_every: k ≥ 1, kept for older callers: the schedule's ``broadcast_every`` (publish
            weights every k learner steps); 1 leaves the schedule's own.
        address: Ray cluster address ('auto', 'ray://host:10001', …); None starts a local Ray.
        num_cpus_per_worker: CPUs reserved per worker (fractions allowed).
        num_gpus_per_worker: GPUs reserved per worker.
        checkpoint_path, checkpoint_every: the learner's checkpoint (0 = never).
        max_restarts: how many worker deaths the run survives in total.

    The staleness itself has one knob, ``RunConfig.staleness`` (a ``DelaySchedule``), read by both
    runtimes: ``{"kind": "fixed", "D": 4}`` on Ray is D = 4 simulated.
    """

    n_workers: int = 1
    mode: str = "fixed_lag"
    broadcast_every: int = 1
    address: str | None = None
    num_cpus_per_worker: float = 1.0
    num_gpus_per_worker: float = 0.0
    checkpoint_path: str | None = None
    checkpoint_every: int = 0
    max_restarts: int = 10

    def __post_init__(self) -> None:
        check_range("n_workers", self.n_workers, low=1)
        check_choice("mode", self.mode, MODES)
        check_range("broadcast_every", self.broadcast_every, low=1)
        check_range("num_cpus_per_worker", self.num_cpus_per_worker, low=0.0)
        check_range("num_gpus_per_worker", self.num_gpus_per_worker, low=0.0)
        check_range("checkpoint_every", self.checkpoint_every, low=0)
        check_range("max_restarts", self.max_restarts, low=0)
        if self.checkpoint_every and not self.checkpoint_path:
            raise ValueError("checkpoint_every > 0 needs checkpoint_path")


def schedule_for(config: RunConfig, async_config: AsyncConfig) -> RunConfig:
    """``config`` with the async config's ``broadcast_every`` and ``mode`` mapped onto its schedule
    (unchanged when they add nothing); a contradiction raises one ``ValueError`` line."""
    staleness = dict(config.staleness)
    k = async_config.broadcast_every
    if k != 1:
        own = staleness.get("broadcast_every", 1)
        if own not in (1, k):
            raise ValueError(f"AsyncConfig broadcast_every={k} contradicts staleness.broadcast_every={own}: set it "
                             "once, in RunConfig.staleness (the schedule both runtimes realise)")
        if own != k:
            config = config.replace(staleness={**staleness, "broadcast_every": k})
    schedule = DelaySchedule.from_dict(config.staleness)
    if async_config.mode == "bounded" and schedule.rule.filters:
        raise ValueError(f"AsyncConfig mode='bounded' paces the actor (staleness admission 'pace'), but "
                         f"staleness.admission={schedule.admission!r} filters stale rollouts instead: leave mode "
                         "at 'fixed_lag' (the schedule is realised either way) or use admission 'pace'")
    return config


class RolloutWorker:
    """A Ray actor: its own task (environment + policy + frictions) that samples on request."""

    def __init__(self, config: dict, threads: int = 1) -> None:
        torch.set_num_threads(threads)
        self.config = RunConfig.from_dict(config)
        built = build(self.config)  # the learner's components, made in the same place
        self.task, self.frictions = built.task, built.frictions
        # the task's own state (e.g. the bandit's correct arms) is drawn with the parameters
        self.task.init_params(derived_generator(self.config.seed, "init"))

    def sample(self, step: int, version: int, params: list[torch.Tensor]) -> tuple[int, int, Rollout, float]:
        start = time.perf_counter()
        rollout = collect(self.task, params, version,
                          derived_generator(self.config.seed, "rollout", step), self.config.seed)
        return step, version, rollout, time.perf_counter() - start

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Slot:
    actor: object
    busy: object | None = None  # the ObjectRef of its in-flight request
    request: tuple[int, int] | None = None  # (step, version)


@dataclass
class AsyncStats:
    restarts: int = 0
    rollouts_received: int = 0
    duplicates_discarded: int = 0
    sample_seconds: float = 0.0
    wait_seconds: float = 0.0  # learner time spent waiting for rollouts
    versions: dict[int, int] = field(default_factory=dict)  # step → version used


def check_resumable(config: RunConfig, saved: RunConfig, path: str) -> None:
    """A resume continues the checkpoint's run: the same config (run id), or only more ``steps``."""
    if config.run_id == saved.run_id or (config.steps > saved.steps
                                         and config.replace(steps=saved.steps).run_id == saved.run_id):
        return
    new, old = config.to_dict(), saved.to_dict()
    differ = sorted(k for k in new if k != "label" and new[k] != old[k])
    raise ValueError(f"config differs from the checkpoint {path} in {differ}: resume needs the same config, "
                     f"or the same with more steps (checkpoint: steps={saved.steps})")


def check_async(config: RunConfig, async_config: AsyncConfig | None = None) -> RunConfig:
    """The run the Ray runtime realises (``schedule_for``), checked before Ray starts. Its workers
    sample every batch, so a friction that resumes sequences with the learner's newer weights, or
    an eager rollout queue, is refused."""
    config = schedule_for(config, async_config or AsyncConfig())
    stack = build_frictions(config.frictions, config.staleness)
    require_versions(stack, None, None)  # the simulated actor's refusal, raised before Ray starts
    if config.history == "rollouts":
        raise ValueError("history='rollouts' samples the batches in the learner's process, but on Ray the workers "
                         "sample them: set history='params'")
    return config


class AsyncRunner:
    """Drives an ``ActorLearner`` with rollouts from Ray workers."""

    def __init__(self, config: RunConfig, async_config: AsyncConfig, resume: bool = False) -> None:
        import ray

        self.ray = ray
        config = check_async(config, async_config)
        self.config, self.acfg = config, async_config
        path = async_config.checkpoint_path
        self.learner = ActorLearner(config)
        self.stats = AsyncStats()
        if resume and path and Path(path).is_file():
            state = torch.load(path, weights_only=False)
            check_resumable(config, RunConfig.from_dict(state["config"]), path)
            self.learner.load_state_dict(state)
            self.stats = AsyncStats(**state.get("async_stats", {}))
            log.info("resumed from %s at step %d", path, self.learner.next_step)
        self.schedule = self.learner.frictions.schedule
        self._published: dict[int, object] = {}  # version → ObjectRef of its weights
        self._done: dict[int, Rollout] = {}
        self._next_step = self.learner.next_step  # first step not yet assigned to a worker
        self._started_ray = start_ray(async_config.address, num_cpus=max(2, async_config.n_workers + 1))
        self._remote = ray.remote(num_cpus=async_config.num_cpus_per_worker,
                                  num_gpus=async_config.num_gpus_per_worker)(RolloutWorker)
        self._slots = [self._new_slot() for _ in range(async_config.n_workers)]
        history = self.learner.history  # the learner's ring holds every version a later step can ask for
        for version in history.versions():
            if version % self.schedule.broadcast_every == 0:
                self._published[version] = ray.put(history.get(version))

    # ------------------------------------------------------------------ workers
    def _new_slot(self) -> _Slot:
        threads = max(1, int(self.acfg.num_cpus_per_worker))
        return _Slot(self._remote.remote(self.config.to_dict(), threads))

    def worker_pids(self) -> list[int]:
        return self.ray.get([slot.actor.pid.remote() for slot in self._slots])

    def _version_for(self, step: int) -> int | None:
        """The version step ``step`` samples with, v_t = t − s_t of the schedule, or None while it
        is not published yet (admission control waits)."""
        version = self.schedule.version(step, self.config.seed)
        return version if version in self._published else None

    def _assign(self) -> None:
        """Give idle workers the next steps that admission control allows."""
        for slot in self._slots:
            if slot.busy is not None or self._next_step >= self.config.steps:
                continue
            version = self._version_for(self._next_step)
            if version is None:
                return
            step = self._next_step
            slot.request = (step, version)
            slot.busy = slot.actor.sample.remote(step, version, self._published[version])
            self._next_step += 1

    def _collect_ready(self, block: bool) -> None:
        """Harvest every finished request (waiting for at least one when ``block``), so that no
        worker sits idle behind a result nobody has picked up."""
        busy = {slot.busy: slot for slot in self._slots if slot.busy is not None}
        if not busy:
            return
        ready, _ = self.ray.wait(list(busy), num_returns=1, timeout=None if block else 0)
        if ready:
            ready, _ = self.ray.wait(list(busy), num_returns=len(busy), timeout=0)
        for ref in ready:
            slot = busy[ref]
            try:
                got_step, got_version, rollout, seconds = self.ray.get(ref)
            except self.ray.exceptions.RayActorError:
                self._restart(slot)
                continue
            slot.busy, slot.request = None, None
            self.stats.rollouts_received += 1
            self.stats.sample_seconds += seconds
            if got_step in self._done or got_step < self.learner.next_step:
                self.stats.duplicates_discarded += 1
                continue
            self._done[got_step] = rollout
            self.stats.versions[got_step] = got_version

    def _pump(self, block: bool) -> None:
        """Pick up finished rollouts and keep every idle worker busy."""
        self._collect_ready(block)
        self._assign()

    def _restart(self, slot: _Slot) -> None:
        """A worker died: replace it and re-sample its step with the same version (same numbers)."""
        self.stats.restarts += 1
        if self.stats.restarts > self.acfg.max_restarts:
            raise RuntimeError(f"more than max_restarts={self.acfg.max_restarts} rollout-worker deaths")
        step, version = slot.request
        log.warning("rollout worker died while sampling step %d; restarting it", step)
        fresh = self._new_slot()
        slot.actor = fresh.actor
        slot.busy = slot.actor.sample.remote(step, version, self._published[version])

    # ------------------------------------------------------------------ learner hooks
    def rollout(self, step: int) -> Rollout:
        start = time.perf_counter()
        self._pump(block=False)
        while step not in self._done:
            self._pump(block=True)
        self._pump(block=False)  # the worker that delivered ``step`` gets its next batch now
        self.stats.wait_seconds += time.perf_counter() - start
        return self._done.pop(step)

    def publish(self, version: int) -> None:
        """After the learner's update to ``version``: the learner publishes it, every k-th version
        goes to the object store, versions no later step can ask for are let go, idle workers get
        work, and the learner is checkpointed with the runtime's counters when one is due."""
        k = self.schedule.broadcast_every
        self.learner.publish(version)
        if version % k == 0:
            self._published[version] = self.ray.put(self.learner.history.get(version))
        # keep what a future assignment or a restart of an in-flight request can still use
        in_flight = {slot.request[1] for slot in self._slots if slot.request is not None}
        target = max(0, self._next_step - self.schedule.max_delay)  # no future t − s_t is older
        floor = target - target % k
        for v in [v for v in self._published if v < floor and v not in in_flight]:
            del self._published[v]
        self._pump(block=False)
        every, path = self.acfg.checkpoint_every, self.acfg.checkpoint_path
        if path is not None and every and version % every == 0 and version < self.config.steps:
            self.learner.save(path, async_stats=self._stats_state())

    def _stats_state(self) -> dict:
        """The runtime's counters as of the learner's step (rollouts already received for later
        steps are sampled again after a resume: not counted)."""
        stats = dataclasses.asdict(self.stats)
        stats["rollouts_received"] -= len(self._done)
        stats["versions"] = {s: v for s, v in stats["versions"].items() if s < self.learner.next_step}
        return stats

    # ------------------------------------------------------------------ run
    def run(self, progress: bool = False) -> pd.DataFrame:
        try:
            self._assign()
            frame = self.learner.run(progress=progress, rollouts=self.rollout, publish=self.publish)
        finally:
            self.shutdown()
        frame["restarts"] = self.stats.restarts
        frame["rollouts_received"] = self.stats.rollouts_received
        frame["learner_wait_seconds"] = self.stats.wait_seconds
        return frame

    def shutdown(self) -> None:
        for slot in self._slots:
            try:
                self.ray.kill(slot.actor)
            except Exception:  # already dead
                pass
        if self._started_ray:
            stop_ray()


def train_async(config: RunConfig, async_config: AsyncConfig | None = None, progress: bool = False,
                resume: bool = False) -> pd.DataFrame:
    """``train`` with real asynchrony: the same rows, plus restarts and the learner's waiting time."""
    runner = AsyncRunner(config, async_config or AsyncConfig(), resume=resume)
    return labelled(runner.run(progress=progress), runner.config)


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start (or join) Ray once per process and leave it up for the next runs (shut down at exit):
    a sweep of asynchronous runs pays Ray's start-up once, not once per run."""
    start_ray(address, num_cpus or max(2, os.cpu_count() or 2))


def train_async_job(progress: bool = False, **params) -> pd.DataFrame:
    """Job function of an asynchronous run: the RunConfig fields plus ``async_config`` (a dict)."""
    async_config = AsyncConfig(**params.pop("async_config", {}))
    ensure_ray(async_config.address)
    return train_async(RunConfig.from_dict(params), async_config, progress=progress)
