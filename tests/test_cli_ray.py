"""Ray from the command line: addresses checked at once, no token-auth notice, its own run id."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.core.ray_start import AUTH_NOTICE_LOGGER, check_address, quiet_ray_logs

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_addresses_are_checked_before_ray_retries_for_minutes():
    check_address(None)
    check_address("auto")  # left to Ray, which answers at once
    for bad in ("localhost", "host:port", ":6379"):
        with pytest.raises(ValueError, match="--ray-address must be 'auto', host:port"):
            check_address(bad)
    with pytest.raises(ValueError, match="no Ray cluster answers there.*ray start --head"):
        check_address("ray://127.0.0.1:1")


def test_the_token_auth_notice_is_silenced_not_the_errors():
    quiet_ray_logs()
    logger = logging.getLogger(AUTH_NOTICE_LOGGER)
    assert not logger.isEnabledFor(logging.WARNING) and logger.isEnabledFor(logging.ERROR)


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_an_async_run_from_the_command_line(tmp_path):
    args = [sys.executable, "-m", "sandbox.cli", "run", "--set", "task=bandit", "--set", "steps=4",
            "--set", "log_points=2", "--results", str(tmp_path)]
    args += ["--set", "staleness.kind=fixed", "--set", "staleness.D=2"]  # one knob for both runtimes
    ray = subprocess.run([*args, "--async-workers", "1"], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert ray.returncode == 0, ray.stderr
    assert "Token authentication" not in ray.stderr and "Traceback" not in ray.stderr, ray.stderr
    sim = subprocess.run([*args, "--quiet"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert sim.returncode == 0, sim.stderr
    ray_id, sim_id = (r.stdout.split()[1].rstrip(":") for r in (ray, sim))
    assert ray_id != sim_id  # the Ray run is its own run, never the simulated one's
    assert len(list(tmp_path.glob("*.parquet"))) == 2
    # fixed-lag Ray = simulated staleness, bit for bit: the same final error
    final = [next(line for line in r.stdout.splitlines() if line.startswith("  final")) for r in (ray, sim)]
    assert final[0] == final[1], final
