"""Staleness admission: pace caps the delay at the budget, drop discards rows with a token staler
than the budget, mask keeps the rows and masks the stale tokens; the fraction of prompts that never
reach the learner is logged, and a budget that never binds changes no number."""

import numpy as np
import pytest
import torch

from sandbox.core.rollout import Rollout
from sandbox.frictions import DelaySchedule
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, train


def _rollout(version):
    """Two members, 4 rows in 2 prompts (groups), 3 tokens; ``version [2, 4, 3]``."""
    shape = version.shape
    return Rollout(obs=torch.zeros(shape[:-1], dtype=torch.long), actions=torch.zeros(shape, dtype=torch.long),
                   mask=torch.ones(shape, dtype=torch.bool), behavior_logp=torch.zeros(shape),
                   true_behavior_logp=torch.zeros(shape), rewards=torch.zeros(shape[:-1]),
                   group=torch.tensor([0, 0, 1, 1]), version=version)


VERSION = torch.tensor([[[10, 10, 10], [8, 9, 10], [7, 7, 7], [10, 10, 10]],
                        [[6, 6, 6], [6, 8, 8], [6, 6, 6], [5, 6, 7]]])


def test_pace_caps_the_delay_and_the_history():
    schedule = DelaySchedule("fixed", D=5, admission="pace", budget=2)
    assert [schedule.delay(t, 0) for t in range(6)] == [0, 1, 2, 2, 2, 2]
    assert schedule.max_delay == 2
    rollout = _rollout(VERSION)
    admitted, dropped = schedule.admit(rollout, 10)
    assert admitted is rollout and dropped is None
    with pytest.raises(ValueError, match="admission='drop' needs a budget"):  # it would admit every rollout
        DelaySchedule("fixed", D=5, admission="drop")


def test_drop_and_mask_by_hand():
    rollout = _rollout(VERSION)
    dropped, frac = DelaySchedule("uniform", D=4, admission="drop", budget=2).admit(rollout, 10)
    assert dropped.mask.all(-1).tolist() == [[True, True, False, True], [False, False, False, False]]
    assert dropped.mask.any(-1).tolist() == dropped.mask.all(-1).tolist()  # whole rows
    assert frac.tolist() == [0.0, 1.0]  # member 0: row 2 dropped but prompt 1 keeps row 3
    masked, frac = DelaySchedule("uniform", D=4, admission="mask", budget=2).admit(rollout, 10)
    assert torch.equal(masked.mask, (10 - VERSION) <= 2)
    assert frac.tolist() == [0.0, 0.5]  # member 1: prompt 0 keeps row 1's last tokens; prompt 1 has none
    with pytest.raises(ValueError, match="admission"):
        DelaySchedule(admission="skip")
    with pytest.raises(ValueError, match="budget"):
        DelaySchedule(budget=-1)


def _config(**staleness):
    return RunConfig(task="bandit", task_kwargs=dict(K=5, N=3, batch_size=8, population=2), estimator="tis",
                     steps=40, log_points=4, lr=0.05, staleness={"kind": "uniform", "D": 4, **staleness})


def test_a_budget_that_never_binds_changes_no_number():
    plain = train(_config())
    for admission in ("pace", "drop", "mask"):
        frame = train(_config(admission=admission, budget=4))
        cols = [c for c in plain.columns if c not in ("wall_time", "run_id")]
        assert plain[cols].equals(frame[cols]), admission
        if admission != "pace":
            assert (frame["prompts_dropped_frac"].dropna() == 0).all()


def test_drop_logs_the_fraction_of_prompts_that_never_reach_the_learner():
    schedule = DelaySchedule("uniform", D=4, admission="drop", budget=1)
    stale_steps = np.mean([schedule.delay(t, 0) > 1 for t in range(40)])
    frame = train(_config(admission="drop", budget=1))
    last = frame[frame["step"] == 40]
    assert stale_steps > 0.3
    assert np.allclose(last["prompts_dropped_frac"], stale_steps)
    masked = train(_config(admission="mask", budget=1))  # T = 1: masking a token drops its row
    assert np.allclose(masked[masked["step"] == 40]["prompts_dropped_frac"], stale_steps)
    paced = train(_config(admission="pace", budget=1))
    assert paced["staleness_max"].max() <= 1 and "prompts_dropped_frac" not in paced


def test_ray_takes_the_run_configs_schedule_or_refuses_it_before_starting():
    """The Ray runtime realises RunConfig.staleness, the one staleness knob (AsyncConfig has none);
    what its workers cannot sample is refused with the simulated actor's own message (no Ray is
    started here)."""
    from sandbox.runtime.ray_async import AsyncConfig, check_async

    plain = RunConfig(task="bandit", task_kwargs=dict(K=5, N=3, batch_size=8))
    stale = plain.replace(staleness={"kind": "uniform", "D": 3, "admission": "mask", "budget": 2})
    assert check_async(stale) == stale
    assert check_async(plain) == plain
    for knob in ("max_staleness", "admission", "admission_budget"):  # one name for one knob
        with pytest.raises(TypeError, match=knob):
            AsyncConfig(**{knob: 1})
    with pytest.raises(ValueError, match="history='rollouts'"):
        check_async(stale.replace(history="rollouts"))
    partial = RunConfig(task="reverse_copy", task_kwargs={"H": 2}, staleness={"kind": "fixed", "D": 1},
                        frictions=(("partial_rollouts", {"chunks": 2}),))
    with pytest.raises(ValueError, match="frictions: 'partial_rollouts' resumes sequences"):
        check_async(partial)


@pytest.mark.xdist_group("ray")
def test_ray_runtime_drops_what_is_staler_than_the_budget():
    ray = pytest.importorskip("ray")
    from sandbox.runtime.ray_async import AsyncConfig, train_async

    config = RunConfig(task="bandit", task_kwargs=dict(K=5, N=3, batch_size=8, population=2), estimator="tis",
                       steps=12, log_points=3, lr=0.05,
                       staleness={"kind": "fixed", "D": 2, "admission": "drop", "budget": 1})
    started = not ray.is_initialized()
    try:
        frame = train_async(config, AsyncConfig(n_workers=1))
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    # fixed lag 2 > budget 1: every batch after the first two is dropped, so those prompts never arrive
    last = frame[frame["step"] == 12]["prompts_dropped_frac"]
    assert np.allclose(last, 10 / 12)


def test_mask_keeps_the_fresh_chunks_of_a_partial_rollout():
    config = RunConfig(task="reverse_copy", task_kwargs=dict(H=4, prompts_per_step=2, samples_per_prompt=2, width=16,
                                                             heads=2, layers=1, mlp=16),
                       estimator="tis", steps=6, log_points=2, lr=0.05, advantage="constant",
                       advantage_kwargs={"b": 0.3},  # every reward in [0, 1] gives a nonzero advantage
                       staleness={"kind": "fixed", "D": 3, "admission": "mask", "budget": 1},
                       frictions=(("partial_rollouts", {"chunks": 2}),))
    learner = ActorLearner(config)
    for step in range(6):
        rollout = learner.rollout(step)
        admitted, dropped = learner.frictions.admit(rollout, step)
        stale_first = min(step, 3) > 1  # chunk 0 (tokens 0, 1) has version t − min(t, 3); chunk 1 is t's
        assert bool(admitted.mask[..., :2].any()) == (not stale_first) and bool(admitted.mask[..., 2:].all())
        assert dropped.tolist() == [0.0]  # every prompt keeps its fresh chunk
        metrics = learner.update(step, rollout)
        assert float(metrics["grad_norm"][0]) > 0
        learner.publish(step + 1)
