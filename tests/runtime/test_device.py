"""RunConfig.device: CPU ids unchanged, refusals, and a step that never waits for the device.

No CUDA here, so the accelerator's code path is checked on two stand-ins: PyTorch's ``meta`` device
(tensors without data: any question to the host — ``bool``, ``.item()``, a copy out — raises, and so
does mixing a CPU tensor into a meta computation), and the CPU with ``on_host`` answering False
(the masked, wait-free path must give the CPU's numbers bit for bit, divergence included).
"""

from __future__ import annotations

import sys

import pandas as pd
import pytest
import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, train

from .test_loop import BANDIT, ExplodesMember0

SEQ = {"H": 4, "population": 3, "prompts_per_step": 2, "samples_per_prompt": 3, "eval_prompts": 2, "eval_samples": 2}


def test_the_device_is_left_out_of_a_cpu_run_and_named_in_any_other():
    cpu = RunConfig(task="reverse_copy", task_kwargs=SEQ)
    assert "device" not in cpu.to_dict() and RunConfig.from_dict(cpu.to_dict()) == cpu
    cuda = cpu.replace(device="cuda")
    assert cuda.to_dict()["device"] == "cuda" and cuda.run_id != cpu.run_id
    assert RunConfig.from_dict(cuda.to_dict()) == cuda
    assert cpu.replace(device="cuda:1").run_id not in (cpu.run_id, cuda.run_id)


def test_a_bad_device_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'$"):
        RunConfig(task="reverse_copy", device="gpu")
    with pytest.raises(ValueError, match=r"^device: task 'bandit' runs on cpu, got 'cuda'$"):
        RunConfig(task="bandit", device="cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused_when_the_run_starts():
    with pytest.raises(ValueError, match="torch.cuda.is_available"):
        ActorLearner(RunConfig(task="reverse_copy", task_kwargs=SEQ, device="cuda"))


def _on(config: RunConfig, device: str) -> ActorLearner:
    object.__setattr__(config, "device", device)  # 'meta' is a test stand-in, not a device a user may ask for
    return ActorLearner(config)


@pytest.mark.parametrize("estimator,extra", [
    ("reinforce", {}), ("tis", {}), ("dg", {}), ("ppo", {}),
    ("tis", {"controllers": (("ess_lr", {}),), "advantage": "grpo"}),
    ("dg", {"frictions": (("precision_mismatch", {"sampler_dtype": "bfloat16"}),)}),
])
def test_a_population_step_on_the_meta_device_never_asks_the_host(estimator, extra):
    """Actor (decode loop, sampling chain, frictions), learner (advantages, estimator, controllers,
    Adam) and the parameter history of a stale run, on the meta device: a host synchronisation or a
    stray CPU tensor anywhere in a step would raise."""
    run = _on(RunConfig(task="reverse_copy", task_kwargs=SEQ, estimator=estimator, steps=3, log_points=1,
                        staleness={"kind": "fixed", "D": 1}, **extra), "meta")
    for step in range(3):
        metrics = run.update(step, run.rollout(step))
        run.publish(step + 1)
    assert all(p.device.type == "meta" for p in run.params)
    assert {v.device.type for v in metrics.values()} == {"meta"}
    assert run.diverged.device.type == "meta"


def _active(name: str) -> dict:
    """The friction at a nonzero strength: every float field whose default is 0 set to 0.1."""
    import dataclasses

    from sandbox.frictions import FRICTIONS

    return {f.name: 0.1 for f in dataclasses.fields(FRICTIONS.get(name))
            if isinstance(f.default, float) and f.default == 0.0}


def _friction_names() -> list[str]:
    from sandbox.frictions import FRICTIONS

    return list(FRICTIONS.names())


@pytest.mark.parametrize("name", _friction_names())
def test_every_friction_keeps_its_draws_on_the_device(name):
    """Each friction, active, through two steps on the meta device (its noise is drawn on the CPU
    generator and moved: the same draws on every device)."""
    from sandbox.frictions import FRICTIONS, FrictionContext, Sample, make_friction

    if getattr(FRICTIONS.get(name), "needs_label_reward", False):  # no sequence task pays 1[a = y]: its hook alone
        labels = torch.zeros(1, 8, 1, dtype=torch.long, device="meta")
        sample = Sample(labels, torch.zeros(1, 8, 1, device="meta"), torch.zeros(1, 8, 1, device="meta"))
        out = make_friction(name, **_active(name)).reward(torch.ones(1, 8, device="meta"), sample,
                                                          FrictionContext(n_actions=4, correct_actions=labels),
                                                          torch.Generator().manual_seed(0), {})
        assert out.device.type == "meta"
        return
    run = _on(RunConfig(task="reverse_copy", task_kwargs=SEQ, estimator="dg", steps=2, log_points=1,
                        frictions=((name, _active(name)),), staleness={"kind": "uniform", "D": 1}), "meta")
    for step in range(2):
        run.update(step, run.rollout(step))
        run.publish(step + 1)


def _without_host(monkeypatch):
    """Every module's ``on_host`` answers False: the code path of an accelerator, on the CPU."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("sandbox") and hasattr(module, "on_host"):
            monkeypatch.setattr(module, "on_host", lambda x: False)


@pytest.mark.parametrize("config", [
    RunConfig(task="reverse_copy", task_kwargs=SEQ, estimator="dg", steps=6, log_points=3,
              staleness={"kind": "fixed", "D": 2}, controllers=(("ess_lr", {}),)),
    RunConfig(task="reverse_copy", task_kwargs=SEQ, estimator="ppo", advantage="rloo", steps=4, log_points=2),
], ids=["dg-stale-ess", "ppo-rloo"])
def test_the_wait_free_path_gives_the_cpu_numbers_bit_for_bit(config, monkeypatch):
    plain = train(config).drop(columns="wall_time")
    _without_host(monkeypatch)
    assert_frames_equal(plain, train(config).drop(columns="wall_time"))


def test_a_diverging_member_is_frozen_without_asking_the_host(monkeypatch):
    """The masked path freezes member 0 exactly as the CPU's branches do; the run goes on."""
    def frame():
        run = ActorLearner(RunConfig(task="bandit", task_kwargs=BANDIT, estimator="reinforce", lr=0.1, steps=10,
                                     log_points=10))
        run.estimator = ExplodesMember0(calls=[])
        return run.run().drop(columns="wall_time")

    plain = frame()
    _without_host(monkeypatch)
    masked = frame()
    assert_frames_equal(plain, masked)
    assert masked[masked.step == 10].sort_values("member").diverged.tolist() == [True, False, False]


def assert_frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True)


def test_jobs_move_to_a_device_only_where_their_task_can_run():
    from sandbox.jobs.devices import on_device
    from sandbox.jobs.sweep import Job

    seq = Job.training(RunConfig(task="reverse_copy", task_kwargs=SEQ, steps=2))
    bandit = Job.training(RunConfig(task="bandit", steps=2))
    nested = Job("simulations.llm:sync_equivalence", {"config": RunConfig(task="hf_text", steps=2).to_dict()})
    cell = Job("sandbox.scoring.runner:score_cell", {"cell": {"run": {"task": "reverse_copy", "task_kwargs": {}}},
                                                     "recipe": {"estimator": "dg"}})
    assert on_device([seq, bandit], "cpu") == [seq, bandit]
    moved = on_device([seq, bandit, nested, cell], "cuda")
    assert moved[0].params["device"] == "cuda" and moved[0].id != seq.id
    assert moved[1] == bandit  # a CPU-only task stays
    assert moved[2].params["config"]["device"] == "cuda" and moved[3].params["cell"]["run"]["device"] == "cuda"
    assert RunConfig.from_dict(moved[0].params).device == "cuda"


def test_the_command_line_takes_a_device(monkeypatch, capsys):
    from sandbox.cli import main
    from sandbox.cli_args import use_device

    for command in ("run", "reproduce", "sweep", "score", "check"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--device DEVICE" in capsys.readouterr().out, command
    with pytest.raises(SystemExit):
        main(["run", "--set", "task=reverse_copy", "--device", "gpu"])
    assert "device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'" in capsys.readouterr().err
    monkeypatch.setenv("SANDBOX_DEVICE", "cpu")  # recorded, so that the teardown removes what use_device sets
    use_device(type("Args", (), {"device": "cuda:1"})())
    from sandbox.jobs.devices import device_from_env

    assert device_from_env() == "cuda:1"
    monkeypatch.setenv("SANDBOX_DEVICE", "tpu")
    with pytest.raises(ValueError, match="^SANDBOX_DEVICE: device must be"):
        device_from_env()


def test_a_newly_diverged_member_is_logged_once_at_a_log_point(caplog):
    import logging

    run = ActorLearner(RunConfig(task="bandit", task_kwargs=BANDIT, estimator="reinforce", lr=0.1, steps=10,
                                 log_points=10))
    run.estimator = ExplodesMember0(calls=[])
    with caplog.at_level(logging.INFO, logger="sandbox.runtime.loop"):
        run.run()
    assert [r.getMessage() for r in caplog.records if "diverged" in r.getMessage()] == ["members [0] diverged"]
