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


def pytest_collection_modifyitems(items):
    """The ``slow`` tests first (a stable sort): with ``-n 2`` the workers take tests in collection
    order, and a long test taken last leaves the other core idle while it runs."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
