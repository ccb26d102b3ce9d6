"""Test-session settings: one torch thread per xdist worker (two workers on two cores must not
oversubscribe the CPU with spinning OpenMP threads)."""

import os

import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
