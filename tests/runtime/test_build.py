"""One ``build(config)`` makes a run's components, for the learner and the Ray workers;
``build_method`` and ``build_frictions`` are its parts that ``score`` and ``check`` use. A config's
validation makes each component once to check it (``sandbox.runtime.components.check_run``) but
builds no run, notes nothing for fingerprints, and checks an equal config once per process."""

from __future__ import annotations

import ast
import pathlib

import pytest

import sandbox.runtime.build as build_module
import sandbox.runtime.components as components
import sandbox.runtime.loop as loop
import sandbox.runtime.ray_async as ray_async
from sandbox.core.usage import recording
from sandbox.runtime.build import build, build_frictions, build_method
from sandbox.runtime.config import RunConfig

CONFIG = RunConfig(task="bandit", task_kwargs={"K": 5, "population": 2}, estimator="dg",
                   estimator_kwargs={"eta": 0.5}, advantage="rloo", controllers=(("clip_grad_norm", {"max_norm": 1.0}),),
                   frictions=(("landmine", {"p_bug": 0.1}),), staleness={"kind": "fixed", "D": 2}, steps=4)


def test_build_makes_every_component_fresh_each_time():
    a, b = build(CONFIG), build(CONFIG)
    assert type(a.task).__name__ == "Bandit" and a.task.K == 5
    assert a.estimator.eta == 0.5 and type(a.advantage).__name__ == "RLOO"
    assert [type(c).__name__ for c in a.controllers] == ["ClipGradNorm"]
    assert [type(f).__name__ for f in a.frictions.frictions] == ["Landmine"]
    assert a.schedule is a.frictions.schedule and a.schedule.max_delay == 2
    assert a.task.frictions is a.frictions  # the task's actor applies this stack
    assert a.optimizer.name == CONFIG.optimizer and a.optimizer.lr == CONFIG.lr
    assert a.task is not b.task and a.controllers[0] is not b.controllers[0] and a.optimizer is not b.optimizer


@pytest.mark.parametrize("make", [lambda: loop.ActorLearner(CONFIG),
                                  lambda: ray_async.RolloutWorker(CONFIG.to_dict())])
def test_the_learner_and_the_ray_worker_call_the_one_build(make, monkeypatch):
    calls = []

    def counting(config):
        calls.append(config.run_id)
        return build(config)

    for module in (build_module, loop, ray_async):
        monkeypatch.setattr(module, "build", counting)
    made = make()
    assert calls == [CONFIG.run_id]  # once: the config read back in the worker is not built to validate it
    assert made.task.frictions is made.frictions and made.frictions.max_delay == 2


def test_validation_builds_no_run_notes_nothing_and_checks_an_equal_config_once(monkeypatch):
    tasks, builds = [], []
    real_make_task = components.make_task

    def counting_make_task(name, kwargs):
        tasks.append(name)
        return real_make_task(name, kwargs)

    monkeypatch.setattr(components, "make_task", counting_make_task)
    monkeypatch.setattr(build_module, "build", lambda config: builds.append(config) or build(config))
    fresh = {**CONFIG.__dict__, "task_kwargs": {"K": 7, "population": 3}}  # not checked before in this process
    with recording() as used:
        config = RunConfig(**fresh)
        again = [RunConfig.from_dict(config.to_dict()), config.replace(seed=5), config.replace(label="x", lr=0.5)]
    assert tasks == ["bandit"] and builds == [] and used == set()
    assert all(c.task_kwargs == {"K": 7, "population": 3} for c in again)
    config.replace(steps=5)  # another config: checked (its schedule against its length) …
    assert tasks == ["bandit", "bandit"]
    with pytest.raises(ValueError, match=r"^task_kwargs: "):  # … and a failure is never remembered as a pass
        config.replace(task_kwargs={"K": 0})
    with pytest.raises(ValueError, match=r"^task_kwargs: "):
        config.replace(task_kwargs={"K": 0})
    assert len(tasks) == 4


def test_types_are_kept_apart_by_the_memory_of_passed_configs():
    config = RunConfig(task="bandit", task_kwargs={"K": 4})
    with pytest.raises(ValueError, match=r"^task_kwargs: "):  # 4.0 is not the int 4 (validated afresh)
        config.replace(task_kwargs={"K": 4.0})
    with pytest.raises(ValueError, match=r"^task_kwargs: "):
        config.replace(task_kwargs={"K": True})


def test_a_class_registered_again_under_a_name_is_checked_afresh(monkeypatch):
    from dataclasses import dataclass

    from sandbox.estimators import ESTIMATORS, Estimator, register_estimator

    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))  # the test's registrations go away

    @register_estimator("check_run_test")
    @dataclass(frozen=True)
    class Lenient(Estimator):
        """Accepts any c."""

        c: float = 1.0

        def token_loss(self, t):
            return -t.token_advantages * t.logp

    config = RunConfig(estimator="check_run_test", estimator_kwargs={"c": -1.0})

    @register_estimator("check_run_test", replace=True)
    @dataclass(frozen=True)
    class Strict(Lenient):
        """Refuses c ≤ 0."""

        def check(self):
            if not self.c > 0:
                raise ValueError(f"c must be > 0, got {self.c}")

    with pytest.raises(ValueError, match=r"^estimator_kwargs: c must be > 0"):
        config.replace(seed=1)


def test_config_and_build_import_one_way():
    """``config`` → ``components`` ← ``build`` → ``config``: no loop, not even for annotations."""
    root = pathlib.Path(components.__file__).parent

    def imported(name: str) -> set[str]:
        tree = ast.parse((root / f"{name}.py").read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "sandbox.runtime.build" not in imported("config") | imported("components")
    assert "sandbox.runtime.config" not in imported("components")


def test_a_failure_names_the_field_or_is_left_as_the_component_raised_it():
    with pytest.raises(ValueError, match=r"^estimator_kwargs: eta must"):
        build_method("dg", {"eta": -1.0})
    with pytest.raises(ValueError, match=r"^eta must"):
        build_method("dg", {"eta": -1.0}, named=False)
    with pytest.raises(ValueError, match=r"^controllers\[0\] gac: "):
        build_method("reinforce", {}, controllers=(("gac", {"c_proj": "x"}),))
    with pytest.raises(ValueError, match=r"^frictions\[0\] landmine: "):
        build_frictions((("landmine", {"p_bug": 2.0}),))
    with pytest.raises(ValueError, match=r"^staleness: "):
        build_frictions((), {"D": 3})
    with pytest.raises(ValueError, match=r"^estimator_kwargs: eta must"):  # validation makes it through the same maker
        CONFIG.replace(estimator_kwargs={"eta": -1.0})


def test_a_label_friction_is_refused_on_a_task_without_a_label_reward_even_when_inactive():
    with pytest.raises(ValueError, match=r"frictions\[0\] label_flip: flips the label"):
        RunConfig(task="gaussian_bandit", frictions=(("label_flip", {"p": 0.0}),))
