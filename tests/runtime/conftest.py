"""Fixtures of the runtime tests."""

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray for the module's tests, started here unless a test in this process (a figure's)
    started one already, and then left running."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()
