"""The GPU run's script, rehearsed on the CPU at toy sizes: every section runs, the files come out
where the device tool returns them, and a second call resumes from the first call's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


def call(out: Path, state: Path, panel: Path, budget: float, *extra: str, machine: Path | None = None) -> dict:
    """One device call: ``machine`` is its /tmp (a fresh one unless given: then it is a warm machine's)."""
    machine = machine or out / "fresh-machine"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SANDBOX_MODELS": str(machine / "models")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--rehearse", "--out", str(out), "--state", str(state),
                           "--panel", str(panel), "--budget", str(budget), "--local-state",
                           str(machine / "gpu-state.json"), *extra], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "gpu-state.json").read_text())


def test_the_gpu_run_is_rehearsed_and_resumes_where_it_stopped(tmp_path):
    calls = [tmp_path / f"call{i}" for i in range(3)]
    # no time left: nothing starts, and each section says why
    state = call(calls[0], tmp_path / "none.json", tmp_path / "none.parquet", 0)
    assert {s["status"] for s in state["sections"].values()} == {"not run"}
    assert all("s left" in s["why"] for s in state["sections"].values())
    # two sections this call (as if the time had gone after them), from the state the last call brought back
    state = call(calls[1], calls[0] / "gpu-state.json", calls[0] / "gpu-panel.parquet", 300, "--sections",
                 "env,population")
    assert [n for n, s in state["sections"].items() if s["status"] == "done"] == ["env", "population"]
    assert {p.name for p in calls[1].iterdir() if p.is_file()} == {"gpu-state.json", "gpu-rehearsal.md", "gpu-log.txt"}
    before = state["sections"]
    # the next call, on a warm machine, finishes the rest from the state that machine kept (none carried)
    warm = tmp_path / "warm-machine"
    (warm).mkdir()
    (warm / "gpu-state.json").write_text((calls[1] / "gpu-state.json").read_text())
    state = call(calls[2], tmp_path / "none.json", tmp_path / "none.parquet", 300, machine=warm)
    sections = state["sections"]
    assert all(s["status"] == "done" for s in sections.values()), sections
    assert len(state["calls"]) == 3 and sections["env"] == before["env"] and sections["population"] == before["population"]
    files = {p.name for p in calls[2].iterdir() if p.is_file()}
    assert files == {"gpu-state.json", "gpu-rehearsal.md", "gpu-log.txt", "gpu-panel.parquet",
                     "gpu-regime.parquet"}  # ≤ 8 files back
    regime = pd.read_parquet(calls[2] / "gpu-regime.parquet")
    assert set(regime.arm) == {"control"} and regime.member.nunique() == 2 and "(e) The matched regime" in \
        (calls[2] / "gpu-rehearsal.md").read_text()
    panel = pd.read_parquet(calls[2] / "gpu-panel.parquet")
    assert panel.job_id.nunique() == sections["panel"]["jobs"] == 8
    assert {label.split(" | ")[0] for label in panel.label} == {"reinforce", "dg"}
    report = (calls[2] / "gpu-rehearsal.md").read_text()
    for heading in ("(a) Log-probs", "(b) GRPO steps", "(c) The H = 10 reversal population", "(d) The pretrained"):
        assert heading in report
    assert "| naive |" in report and "| cpu | 2 |" in report and "8 of 8 jobs done" in report


def test_without_cuda_the_gpu_run_refuses_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    import torch

    if torch.cuda.is_available():
        return
    assert done.returncode == 1 and "--rehearse" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_model_file_is_assembled_from_its_carried_parts(tmp_path, monkeypatch):
    """The parts --prepare cut the file into, carried one per call, are joined and checked (sha256)
    before the conversion; a missing part leaves it for a later call."""
    import hashlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from _gpu_prepare import model_on_device

    from sandbox.policies.hf import pretrained

    data = os.urandom(1000)
    gpu = tmp_path / ".gpu"
    (gpu / "smollm2-meta").mkdir(parents=True)
    (gpu / "smollm2-meta" / "gguf.json").write_text(json.dumps(
        {"file": "x.gguf", "bytes": 1000, "parts": 3, "sha256": hashlib.sha256(data).hexdigest()}))
    monkeypatch.setenv("SANDBOX_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(pretrained.PackagedModel, "model_file", lambda self: None)  # a machine without the package
    converted = []
    monkeypatch.setattr(pretrained, "convert_file", lambda name, source: converted.append(Path(source).read_bytes()))
    for i, piece in enumerate((data[:334], data[334:668])):
        (gpu / f"model-{i + 1}").mkdir()
        (gpu / f"model-{i + 1}" / "part").write_bytes(piece)
    assert not model_on_device(gpu, tmp_path / "models") and not converted  # part 3 not here yet
    (gpu / "model-3").mkdir()
    (gpu / "model-3" / "part").write_bytes(data[668:])
    assert model_on_device(gpu, tmp_path / "models") and converted == [data]
    (gpu / "model-3" / "part").write_bytes(data[668:][::-1])  # parts of another --prepare
    with pytest.raises(RuntimeError, match="sha256"):
        model_on_device(gpu, tmp_path / "models")
