"""What ``sandbox run`` does before it trains (issue 47; timed by ``benchmarks/startup.py``): the
argument parser imports nothing heavy, a run is built once, and ``--no-store`` skips the code stamp
whose fingerprints run canaries."""

from __future__ import annotations

import json
import subprocess
import sys

import sandbox.jobs.backends as backends
import sandbox.runtime.components as components
import sandbox.runtime.loop as loop
from sandbox.cli import main
from sandbox.jobs.store import ResultsStore

BANDIT = ["run", "--set", "task=bandit", "--set", "task_kwargs.K=5", "--set", "estimator=dg", "--set", "steps=3",
          "--quiet"]
#: modules a run must not wait for before it trains (scipy.stats: ≈ 0.5 s; sandbox.check pulls it in)
HEAVY = ("scipy.stats", "matplotlib", "sandbox.check", "sandbox.scoring.api", "sandbox.analysis.stats")

PROBE = """
import json, sys
from sandbox.cli import build_parser, main
build_parser()
after_parser = [m for m in {heavy} if m in sys.modules]
main({argv})
print(json.dumps({{"parser": after_parser, "run": [m for m in {heavy} if m in sys.modules]}}))
"""


def test_the_parser_and_a_one_seed_run_import_no_scipy_stats_nor_the_check():
    code = PROBE.format(heavy=repr(HEAVY), argv=repr([*BANDIT, "--no-store"]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == {"parser": [], "run": []}


def test_no_store_skips_the_code_stamp_and_its_canaries(monkeypatch, tmp_path, capsys):
    stamped = []
    real = backends.job_code
    monkeypatch.setattr(backends, "job_code", lambda used=None: stamped.append(sorted(used)) or real(used))
    assert main([*BANDIT, "--no-store"]) == 0
    assert stamped == []
    assert main([*BANDIT, "--results", str(tmp_path)]) == 0  # a stored run keeps its stamp, fingerprints and all
    assert len(stamped) == 1 and any(key.startswith("task:bandit") for key in stamped[0])
    store = ResultsStore(tmp_path)
    (job_id,) = store.job_ids()
    assert any(key.startswith("task:bandit") for key in store.code(job_id)["fingerprints"])


def test_a_run_is_built_once_and_each_config_it_makes_is_checked_once(monkeypatch, capsys):
    builds, checks = [], []
    real_build, real_make_task = loop.build, components.make_task
    monkeypatch.setattr(loop, "build", lambda config: builds.append(config.run_id) or real_build(config))
    monkeypatch.setattr(components, "make_task", lambda name, kw: checks.append(kw) or real_make_task(name, kw))
    assert main([*BANDIT, "--set", "task_kwargs.K=6", "--seeds", "3", "--no-store"]) == 0
    assert len(builds) == 1
    # the config as parsed, and with the population of 3 seeds: the job read back is not checked again
    assert checks == [{"K": 6}, {"K": 6, "population": 3}]
