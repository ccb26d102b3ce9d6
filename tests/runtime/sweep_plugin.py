"""A test-only figure of 16 small training jobs (loaded with ``sandbox --plugin``)."""

from sandbox.jobs.sweep import Job
from sandbox.runtime.config import RunConfig
from simulations import Figure, register_figure

TASK = {"N": 10, "K": 10, "batch_size": 10, "samples_per_context": 4, "population": 4}


def jobs(fidelity):
    return [Job.training(RunConfig(task="bandit", task_kwargs=TASK, estimator="dg", lr=0.05, steps=600, seed=s,
                                   log_points=5, label=f"seed {s}")) for s in range(16)]


register_figure(Figure("test-sweep", "test", "sixteen small runs", jobs, "notebooks/none.py"))
