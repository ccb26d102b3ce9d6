"""What ``benchmarks/gpu.py`` needs on a machine that reaches nothing: prepared here, carried there.

The device tool carries the working tree and at most 8 git-ignored paths, 64 MiB in all, per call;
the machine stays warm (and keeps what was carried) for 30 s after a call. So ``prepare`` writes,
under ``.gpu/`` (git-ignored): ``wheels/`` (gguf and liger-kernel, pure Python: the device has
torch, triton and transformers), ``smollm2-meta/`` (SmolLM2's config and tokenizer, and the plan
of its file's parts) and ``model-1/part`` … ``model-K/part``: the 98 MB GGUF file in pieces that
each fit one call beside the tree. Then it prints the calls to make.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 2**20  # the device tool's carry limit per call (tree + carried paths)
MARGIN = 3 * 2**20
WHEELS = ("gguf", "liger-kernel")
META_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def tree_bytes(root: Path) -> int:
    """What travels without being named: tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                           check=True).stdout.decode().split("\0")
    return sum((root / n).stat().st_size for n in names if n and (root / n).is_file())


def prepare(gpu_dir: Path) -> int:
    root = gpu_dir.parent
    exclude = Path(subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], cwd=root, capture_output=True,
                                  text=True, check=True).stdout.strip())
    exclude = exclude if exclude.is_absolute() else root / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    listed = exclude.read_text(errors="replace").split() if exclude.is_file() else []
    if "/.gpu/" not in listed:
        with exclude.open("a") as f:
            f.write("/.gpu/\n")
    wheels = gpu_dir / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    pins = []
    for name in WHEELS:
        pin = _version(name)
        pins.append(f"{name}=={pin}" if pin else name)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
                    "--platform", "any", "-d", str(wheels), *pins], check=True)

    from sandbox.policies.hf.pretrained import PRETRAINED, checkpoint_dir

    meta = gpu_dir / "smollm2-meta"
    meta.mkdir(parents=True, exist_ok=True)
    folder = checkpoint_dir("smollm2-135m")  # converts once if needed
    for name in META_FILES:
        shutil.copy(folder / name, meta / name)
    source = PRETRAINED["smollm2-135m"].model_file()
    data = source.read_bytes()
    for old in gpu_dir.glob("model-*"):
        shutil.rmtree(old)
    fixed = tree_bytes(root) + _size(wheels) + _size(meta)
    room = LIMIT - fixed - MARGIN
    if room < 8 * 2**20:
        raise SystemExit(f"the tree already takes {fixed / 2**20:.1f} MiB of the 64 MiB a call carries")
    parts = -(-len(data) // room)
    size = -(-len(data) // parts)
    for i in range(parts):
        (gpu_dir / f"model-{i + 1}").mkdir()
        (gpu_dir / f"model-{i + 1}" / "part").write_bytes(data[i * size:(i + 1) * size])
    (meta / "gguf.json").write_text(json.dumps({"file": source.name, "bytes": len(data), "parts": parts,
                                                "sha256": hashlib.sha256(data).hexdigest()}))
    print(_plan(fixed, size, parts))
    return 0


def _plan(fixed: int, size: int, parts: int) -> str:
    """The calls: the first measures (a)–(c) with part 1 aboard; the next ones, made at once (a machine
    stays warm 30 s and keeps /tmp and what was carried), bring the other parts; the last has them all
    and runs the panel. 15 min of device time: a start (≤ 2 min) + 330 s + 60 s per middle call + the rest."""
    always = [".gpu/wheels", ".gpu/smollm2-meta"]
    setup = ("python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .gpu/wheels/*.whl "
             "&& export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit; ")
    lines = [f"Prepared .gpu/: the tree and the always-carried paths take {fixed / 2**20:.1f} MiB; the SmolLM2 file "
             f"is in {parts} part(s) of {size / 2**20:.1f} MiB (one per call: 64 MiB each).", "",
             "Device calls (the device tool's `run`), each made as soon as the last returns (a machine stays warm "
             "30 s, and keeps /tmp — the script's own state — and the parts carried before):"]
    for i in range(parts):
        budget = 330 if i == 0 else (240 if i == parts - 1 else 30)
        carry = always + [f".gpu/model-{i + 1}"]
        lines.append(f"  {i + 1}. carry={json.dumps(carry)}, timeout_s={budget + 70}, command=\"{setup}python3 "
                     f"benchmarks/gpu.py --out $OUT --budget {budget}\"")
    lines += ["", "Then: copy gpu-state.json and gpu-panel.parquet from the last call's files into benchmarks/results/ "
              "(a later call on a fresh machine resumes from them) and its gpu-<date>.md; "
              "python benchmarks/gpu.py --import-panel benchmarks/results/gpu-panel.parquet; commit the three files. "
              "If the machine went back between calls, the parts carried before are gone: (a)–(c) are in the "
              "state already; carry the parts again, one call each, while time is left."]
    return "\n".join(lines)


def _version(name: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- on the device
def random_smollm2(gpu_dir: Path) -> Path:
    """A checkpoint of SmolLM2-135M's config and tokenizer (carried in .gpu/smollm2-meta) with random weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    meta, folder = gpu_dir / "smollm2-meta", Path("/tmp/smollm2-random")
    if not (folder / "model.safetensors").is_file():
        shutil.copytree(meta, folder, dirs_exist_ok=True)
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    return folder


def model_on_device(gpu_dir: Path, models: Path) -> bool:
    """Assemble the carried parts of the SmolLM2 file (if all are here) and convert it once."""
    import hashlib

    os.environ.setdefault("SANDBOX_MODELS", str(models))
    from sandbox.policies.hf.pretrained import PRETRAINED, _converted_here, convert_file

    if _converted_here("smollm2-135m"):
        return True
    if PRETRAINED["smollm2-135m"].model_file() is not None:
        return True
    meta = gpu_dir / "smollm2-meta" / "gguf.json"
    if not meta.is_file():
        return False
    plan = json.loads(meta.read_text())
    parts = [gpu_dir / f"model-{i + 1}" / "part" for i in range(plan["parts"])]
    if not all(p.is_file() for p in parts):
        print("model parts here:", [p.parent.name for p in parts if p.is_file()])
        return False
    whole, digest = Path("/tmp/smollm2.gguf"), hashlib.sha256()
    with whole.open("wb") as f:
        for p in parts:
            data = p.read_bytes()
            digest.update(data)
            f.write(data)
    if digest.hexdigest() != plan["sha256"]:
        raise RuntimeError("the assembled SmolLM2 file does not match its sha256: carry the parts of one --prepare")
    convert_file("smollm2-135m", whole)
    return True


def import_panel(parquet: str, results: str) -> int:
    """The panel's rows (``gpu-panel.parquet``, one job per ``job_id``) into a results store."""
    import pandas as pd

    from sandbox.jobs.store import ResultsStore

    frame, store = pd.read_parquet(parquet), ResultsStore(results)
    for job_id, rows in frame.groupby("job_id", sort=False):
        store.write(job_id, rows.drop(columns=["wall_s"], errors="ignore").reset_index(drop=True),
                    {"device": "cuda", "cpu_seconds": float(rows["cpu_s"].iloc[0])})
    print(f"{frame.job_id.nunique()} panel job(s) written to {results}/")
    return 0
