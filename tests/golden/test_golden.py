"""Every golden case (tests/golden/cases.py) gives the frozen numbers within the float32 tolerance
of tests/golden/tolerance.py (bit for bit is not asked: another CPU rounds otherwise), and does so
under every CPU capability torch offers on this machine."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.golden.cases import DATA, cases, record
from tests.golden.tolerance import FROZEN, capability, compare, frozen_capability

pytestmark = pytest.mark.usefixtures("one_thread")
CASES = cases()
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    config = CASES[name]
    want = torch.load(DATA / f"{name}.pt", weights_only=False)
    compare(record(config), want, name, config.lr, config.steps)


def test_the_data_record_the_capability_they_were_frozen_on():
    recorded = json.loads(FROZEN.read_text())
    assert recorded["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "SVE128")


def _offered() -> list[str]:
    """The capabilities ``ATEN_CPU_CAPABILITY`` can select here besides the native one (it only lowers)."""
    out = []
    for name in ("default", "avx2", "avx512"):
        got = subprocess.run([sys.executable, "-c", "import torch;print(torch.backends.cpu.get_cpu_capability())"],
                             env={**os.environ, "ATEN_CPU_CAPABILITY": name}, capture_output=True, text=True,
                             check=True).stdout.strip()
        if got == name.upper() and got != capability():
            out.append(name)
    return out


@pytest.mark.slow
def test_the_golden_cases_pass_under_every_other_cpu_capability():
    """Re-freezes nothing: runs this module's golden cases in a subprocess per capability."""
    offered = _offered()
    assert offered or capability() == "DEFAULT", "torch offers no other capability on an x86 machine?"
    for name in offered:
        env = {**os.environ, "ATEN_CPU_CAPABILITY": name, "PYTHONPATH": str(ROOT)}
        run = subprocess.run([sys.executable, "-m", "pytest", f"{Path(__file__)}::test_golden", "-q", "-x",
                              "-n", "0", "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True)
        assert run.returncode == 0, f"ATEN_CPU_CAPABILITY={name} (frozen on {frozen_capability()}):\n{run.stdout[-3000:]}"
        assert f"{len(CASES)} passed" in run.stdout, run.stdout[-500:]
