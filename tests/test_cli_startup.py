"""What ``sandbox run`` does before it trains (issue 47; timed by ``benchmarks/startup.py``): the
argument parser imports nothing heavy, a run is built once, and ``--no-store`` skips the code stamp
whose fingerprints run canaries."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import sandbox.jobs.backends as backends
import sandbox.runtime.components as components
import sandbox.runtime.loop as loop
from sandbox.cli import main
from sandbox.jobs.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]
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


#: what a bandit run (the README's example) need not import: the other task families' modules and
#: environments (``load_tasks(name)`` stops at the module that registers the run's task), and the
#: heavy libraries of other commands
NOT_ON_A_BANDIT_RUN = ("sandbox.tasks.sequences", "sandbox.tasks.regime", "sandbox.tasks.hf_text", "sandbox.tasks.mnist",
                       "sandbox.envs.sequences", "sandbox.envs.text", "sandbox.envs.mnist", "sandbox.check",
                       "sandbox.scoring.api", "scipy.stats", "matplotlib", "transformers", "ray", "yaml")


def test_the_readme_run_imports_its_task_module_only_and_no_heavy_library():
    argv = [*BANDIT, "--set", "steps=20", "--set", "staleness.kind=fixed", "--set", "staleness.D=4", "--seeds", "4",
            "--no-store"]
    code = PROBE.format(heavy=repr(NOT_ON_A_BANDIT_RUN), argv=repr(argv))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "mean [95% t-interval] over 4 seeds" in done.stdout  # the run's report was made
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == {"parser": [], "run": []}


TASK_BY_NAME = """
import json, sys
from sandbox.policies import POLICIES
from sandbox.tasks import TASKS, load_tasks
load_tasks({name!r})
print(json.dumps({{"found": {name!r} in TASKS, "policies": POLICIES.names(),
                   "modules": sorted(m for m in sys.modules if m.startswith("sandbox.tasks."))}}))
"""


def test_a_task_is_loaded_by_name_and_every_policy_family_without_any_task():
    def probe(name):
        done = subprocess.run([sys.executable, "-c", TASK_BY_NAME.format(name=name)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    bandit, sequence, unknown = probe("bandit"), probe("reverse_copy"), probe("no_such_task")
    assert bandit["found"] and "sandbox.tasks.bandits" in bandit["modules"]
    assert not {"sandbox.tasks.sequences", "sandbox.tasks.hf_text"} & set(bandit["modules"])
    declared = {name for path in (ROOT / "sandbox" / "policies").rglob("*.py")
                for name in re.findall(r'@register_policy\("(\w+)"\)', path.read_text())}
    assert len(declared) >= 4 and bandit["policies"] == sorted(declared)  # every family found by name on any task
    assert sequence["found"] and "sandbox.tasks.sequences" in sequence["modules"]
    assert not unknown["found"] and {"sandbox.tasks.sequences", "sandbox.tasks.hf_text", "sandbox.tasks.mnist",
                                     "sandbox.tasks.regime"} <= set(unknown["modules"])  # all looked in


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
