"""A local Ray started by the runtime ends with its driver: on SIGTERM (a handler) and on SIGKILL
(the reaper), no Ray process is left behind."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest

from sandbox.core.processes import HOST, descendants, process_alive, start_time
from tests.reliability.test_processes import ROOT, wait_for

pytestmark = [pytest.mark.xdist_group("ray"),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")]

DRIVER = """
import time, ray
from sandbox.core.processes import start_ray
start_ray(num_cpus=1)
ray.get(ray.remote(lambda: 1).remote())
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_driver_leaves_no_ray_processes(sig):
    env = {**os.environ, "RAY_raylet_start_wait_time_s": "120"}  # a loaded test machine starts Ray slowly
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    ray_processes = [(pid, start_time(pid)) for pid in descendants(proc.pid)]
    ray_processes = [(pid, start) for pid, start in ray_processes if start is not None]
    assert len(ray_processes) >= 3  # gcs, raylet, agents, workers
    proc.send_signal(sig)
    proc.wait(timeout=30)
    start = time.time()
    wait_for(lambda: not any(process_alive(HOST, pid, s) for pid, s in ray_processes), seconds=15)
    assert time.time() - start < 15
