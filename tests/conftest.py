"""Test-session settings: one torch thread per xdist worker (two workers on two cores must not
oversubscribe the CPU with spinning OpenMP threads)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads libgomp (see sandbox/__init__.py)

import pytest  # noqa: E402
import torch  # noqa: E402

from sandbox.jobs.sweep import intra_op_threads  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny models (as fast, and immune to OpenMP waits on a
    busy machine); use with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    with intra_op_threads(1):
        yield
