"""Delay schedules, the parameter ring, the eager rollout queue, and D = 0 bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sandbox.frictions import DelaySchedule
from sandbox.runtime.config import RunConfig
from sandbox.runtime.history import ParameterHistory
from sandbox.runtime.loop import metrics_only, train

BANDIT = {"N": 5, "K": 6, "batch_size": 5, "samples_per_context": 4, "population": 3, "init_std": 1.0}


def _cfg(**kw):
    base = dict(task="bandit", task_kwargs=BANDIT, estimator="tis", advantage="group_mean", optimizer="adam",
                lr=0.1, steps=40, log_points=10, seed=3)
    base.update(kw)
    return RunConfig(**base)


def _numeric(frame):
    return metrics_only(frame)


def test_schedules():
    assert [DelaySchedule("fixed", D=3).delay(t, 0) for t in range(6)] == [0, 1, 2, 3, 3, 3]
    uniform = [DelaySchedule("uniform", D=4).delay(t, 0) for t in range(10, 400)]
    assert set(uniform) == {0, 1, 2, 3, 4}
    geo = np.array([DelaySchedule("geometric", D=50, p=0.25).delay(t, 0) for t in range(100, 3100)])
    assert abs(geo.mean() - 3.0) < 0.3  # mean of Geometric(p) − 1 = (1 − p)/p = 3
    assert [DelaySchedule("per_actor", D=8, n_actors=4).delay(t, 0) for t in range(8, 16)] == [0, 2, 4, 6] * 2
    assert DelaySchedule("uniform", D=4).delay(20, 7) == DelaySchedule("uniform", D=4).delay(20, 7)
    with pytest.raises(ValueError, match="staleness kind must be one of"):
        DelaySchedule("random")
    with pytest.raises(ValueError, match=r"D must lie in \[0, inf\]"):
        DelaySchedule("fixed", D=-1)


def test_parameter_ring_keeps_only_needed_versions():
    ring = ParameterHistory(capacity=3)
    for v in range(10):
        ring.push(v, [torch.full((2,), float(v))])
    assert len(ring) == 3 and ring.get(9)[0][0] == 9 and ring.get(7)[0][0] == 7
    assert ring.nbytes() == 3 * 2 * 4
    with pytest.raises(ValueError, match="version 6 is not in the parameter history"):
        ring.get(6)


def test_zero_delay_is_the_synchronous_loop_bit_for_bit():
    sync = train(_cfg())
    for staleness in ({"kind": "fixed", "D": 0}, {"kind": "uniform", "D": 0}):
        stale0 = train(_cfg(staleness=staleness))
        assert sync["run_id"].iloc[0] != stale0["run_id"].iloc[0]  # different configs …
        assert _numeric(sync).equals(_numeric(stale0))  # … identical numbers


def test_same_config_same_numbers():
    assert _numeric(train(_cfg())).equals(_numeric(train(_cfg())))


@pytest.mark.parametrize("staleness", [{"kind": "fixed", "D": 5}, {"kind": "uniform", "D": 6}, {"kind": "geometric", "D": 8, "p": 0.3}])
def test_rollout_queue_equals_parameter_history(staleness):
    a = train(_cfg(staleness=staleness, history="params"))
    b = train(_cfg(staleness=staleness, history="rollouts"))
    assert _numeric(a).equals(_numeric(b))
    assert (a[a.step > 6].staleness_mean > 0).any()


def test_staleness_is_measured_per_token():
    frame = train(_cfg(staleness={"kind": "fixed", "D": 4}, steps=20))
    late = frame[frame.step >= 6]
    assert np.allclose(late.staleness_mean, 4.0)
    assert frame[frame.step == 1].staleness_mean.iloc[0] == 0.0
