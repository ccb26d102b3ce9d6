"""The numerics version moves with the golden numbers: re-freezing the golden data (an intended
change of numbers) without bumping ``sandbox.core.numerics.NUMERICS`` fails here, so stored
results of the old numbers are never taken for the new ones."""

import hashlib
import json
from pathlib import Path

import torch

from sandbox.core.numerics import NUMERICS
from tests.golden.cases import DATA

RECORD = Path(__file__).parent / "numerics.json"


def golden_values_hash() -> str:
    """sha256 over every golden case's tensors (names, dtypes, shapes, bytes), file by file."""
    digest = hashlib.sha256()

    def walk(obj, where):
        if isinstance(obj, dict):
            for k in sorted(obj):
                walk(obj[k], f"{where}.{k}")
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{where}[{i}]")
        else:
            t = obj.detach().contiguous().cpu()
            digest.update(f"{where}:{t.dtype}:{tuple(t.shape)}".encode())
            digest.update((t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes())

    for path in sorted(DATA.glob("*.pt")):
        walk(torch.load(path, weights_only=False), path.stem)
    return digest.hexdigest()


def test_the_golden_numbers_and_the_numerics_version_move_together():
    recorded = json.loads(RECORD.read_text())
    now = golden_values_hash()
    if now != recorded["golden_values"]:
        assert NUMERICS != recorded["numerics"], (
            "the golden numbers changed but sandbox.core.numerics.NUMERICS did not: bump it (stored results of "
            f"the old numbers must not pass for new ones), then record {{'numerics': NUMERICS, 'golden_values': "
            f"'{now}'}} in {RECORD}")
        raise AssertionError(f"NUMERICS was bumped to {NUMERICS}: record {{'numerics': {NUMERICS}, "
                             f"'golden_values': '{now}'}} in {RECORD}")
    assert recorded["numerics"] == NUMERICS, f"{RECORD} records numerics {recorded['numerics']}, the code {NUMERICS}"
