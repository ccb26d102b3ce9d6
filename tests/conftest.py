"""Test-session settings: one torch thread per xdist worker (two workers on two cores must not
oversubscribe the CPU with spinning OpenMP threads)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads libgomp (see sandbox/__init__.py)

import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
