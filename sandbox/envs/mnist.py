"""Contaminated MNIST: a contextual bandit on real digits (shared/spec/environments.md).

Each step draws B images x per population member; the policy (an MLP 784 → H → 10) samples a
digit a ~ π(·|x) ``samples_per_context`` times per image; R = 1[a = y]. The label reaches the
learner only through R (and the supervised ``xent`` oracle through ``target_logp``).

The loader parses IDX files (gzip or raw), verifies the published MD5s, looks in user folders,
``$SANDBOX_MNIST_DIR``, ``<repo>/../shared/data/mnist`` and the cache ``$SANDBOX_DATA/mnist``
(default ``~/.cache/sandbox/mnist``), downloads from the public mirrors when a file is missing
and a network exists, and otherwise raises a ``ValueError`` naming the four files and where to
put them.

Splits: ``test10k`` splits the official 10k test set by a fixed permutation into a training part
(``train_size``, default 8k) and an evaluation part (the rest); ``full`` trains on the official
60k training set and evaluates on the 10k test set; ``auto`` is ``full`` when the 60k files can be
found (or downloaded), else ``test10k``.

``MNISTEnv`` is the contextual environment (``sandbox.envs.contextual``) that the ``mnist`` task
composes with an MLP policy (``sandbox.tasks.mnist``).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from sandbox.core.observations import ContextVectorSpec
from sandbox.core.seeding import derived_generator
from sandbox.core.validation import check_choice, check_int
from sandbox.envs.contextual import ContextualEnv

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- files
#: (split, kind) → (file name, published MD5 of the gzip file)
FILES: dict[tuple[str, str], tuple[str, str]] = {
    ("train", "images"): ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    ("train", "labels"): ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
    ("test", "images"): ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
    ("test", "labels"): ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
}
#: (split, kind) → MD5 of the raw (gunzipped) IDX file, as published with the gzip ones
RAW_MD5: dict[tuple[str, str], str] = {
    ("train", "images"): "6bbc9ace898e44ae57da46a324031adb", ("train", "labels"): "a25bea736e30d166cdddb491f175f624",
    ("test", "images"): "2646ac647ad5339dbf082846283269ea", ("test", "labels"): "27ae3e4e09519cfbb04c329615203637",
}
#: the standard public mirrors, tried in order
MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/",
           "http://yann.lecun.com/exdb/mnist/")
REPO = Path(__file__).resolve().parents[2]
SPLITS = ("test10k", "full", "auto")
PIXELS = 28 * 28  # what the policy sees of an image: its flattened pixels
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class MNISTError(ValueError):
    """Base class of the loader's errors (a ``ValueError``)."""


class MNISTNotFoundError(MNISTError):
    """A file is missing everywhere and could not be downloaded."""


class ChecksumError(MNISTError):
    """A file's MD5 differs from the published value (corrupted or truncated)."""


class IDXFormatError(MNISTError):
    """A file is not a well-formed IDX file (bad magic, truncated, trailing bytes)."""


def all_file_names() -> list[str]:
    return [name for name, _ in FILES.values()]


def cache_dir() -> Path:
    """``$SANDBOX_DATA/mnist`` (default ``~/.cache/sandbox/mnist``)."""
    return Path(os.environ.get("SANDBOX_DATA") or Path.home() / ".cache" / "sandbox") / "mnist"


def check_data_dirs(dirs: Sequence[str | os.PathLike]) -> None:
    """A folder given as ``data_dir`` must exist: it would otherwise be passed over silently and the
    images read from somewhere else."""
    for d in dirs:
        if not Path(d).is_dir():
            raise ValueError(f"data_dir {str(d)!r} is not a folder; give the folder that holds the MNIST IDX "
                             "files, or leave data_dir unset to search $SANDBOX_MNIST_DIR, shared/data/mnist and the cache")


def search_dirs(data_dir: str | os.PathLike | Sequence[str | os.PathLike] | None = None) -> list[Path]:
    """Folders searched in order: ``data_dir`` (one or several), ``$SANDBOX_MNIST_DIR``
    (``os.pathsep``-separated), ``shared/data/mnist`` beside the repository or beside any folder
    above it (``<repo>/../shared/data/mnist`` first), the cache."""
    dirs: list[Path] = []
    if data_dir is not None:
        dirs += [Path(data_dir)] if isinstance(data_dir, (str, os.PathLike)) else [Path(d) for d in data_dir]
    env = os.environ.get("SANDBOX_MNIST_DIR")
    if env:
        dirs += [Path(d) for d in env.split(os.pathsep) if d]
    dirs += [ancestor / "shared" / "data" / "mnist" for ancestor in Path(REPO).resolve().parents]
    dirs.append(cache_dir())
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def find_test_split() -> Path | None:
    """The first searched folder that holds the official test split (t10k), or None."""
    for folder in search_dirs():
        if all((folder / FILES[("test", kind)][0]).is_file() for kind in ("images", "labels")):
            return folder
    return None


def md5sum(path: str | os.PathLike) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_md5(path: str | os.PathLike, expected: str) -> None:
    """Raise ``ChecksumError`` unless ``md5(path) == expected``."""
    got = md5sum(path)
    if got != expected:
        size = os.path.getsize(path)
        raise ChecksumError(
            f"{path}: MD5 {got} does not match the published {expected} ({size} bytes): the file is "
            "truncated or corrupted; delete it and download it again"
        )


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse an IDX buffer: magic 0x0000, dtype code, ndim, ndim big-endian uint32 sizes, data."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise IDXFormatError(f"{source}: not an IDX file (the first two bytes must be 0)")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise IDXFormatError(f"{source}: unknown IDX data type code 0x{code:02x}; valid: "
                             + ", ".join(f"0x{c:02x}" for c in IDX_DTYPES))
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{source}: truncated IDX header ({len(data)} bytes, need {header})")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        kind = "truncated" if len(data) < expected else "has trailing bytes"
        raise IDXFormatError(f"{source}: IDX file {kind}: {len(data)} bytes, header {shape} implies {expected}")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> Tensor:
    """Read an IDX file, gzip-compressed (detected by its magic bytes) or raw, into a tensor."""
    path = Path(path)
    if not path.is_file():
        raise MNISTNotFoundError(f"{path}: no such file")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, gzip.BadGzipFile) as err:
            raise IDXFormatError(f"{path}: truncated or corrupted gzip stream ({err})") from err
    return torch.from_numpy(parse_idx(raw, str(path)).copy())


def download(name: str, dest: str | os.PathLike, md5: str | None = None, mirrors: Sequence[str] = MIRRORS,
             timeout: float = 5.0) -> Path:
    """Fetch ``name`` from the first mirror that serves it into ``dest`` (atomically, MD5-checked)."""
    dest = Path(dest)
    errors = []
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + name
        try:
            dest.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(url, timeout=timeout) as response, \
                    tempfile.NamedTemporaryFile(dir=dest, delete=False, suffix=".part") as tmp:
                shutil.copyfileobj(response, tmp)
            try:
                if md5 is not None:
                    verify_md5(tmp.name, md5)
                os.replace(tmp.name, dest / name)
            finally:
                if os.path.exists(tmp.name):
                    os.unlink(tmp.name)
            log.info("downloaded %s from %s", name, url)
            return dest / name
        except (urllib.error.URLError, OSError, ValueError) as err:
            errors.append(f"{url}: {err}")
    raise MNISTNotFoundError(f"could not download {name}: " + "; ".join(errors))


def _missing_message(missing: list[str], dirs: list[Path], reason: str) -> str:
    return (
        f"MNIST file(s) not found: {', '.join(missing)}. Put the four files "
        f"{', '.join(all_file_names())} (gzip, as published; the t10k pair is enough for the 10k split) "
        f"in one of: {', '.join(str(d) for d in dirs)} — or pass data_dir=… / set SANDBOX_MNIST_DIR. "
        f"{reason}"
    )


def find_file(split: str, kind: str, data_dir=None, download_missing: bool = True,
              mirrors: Sequence[str] = MIRRORS, timeout: float = 5.0) -> Path:
    """Path of one verified file: the gzip file, or a raw (gunzipped) copy, checked against its
    published MD5. Downloads into the cache when missing everywhere."""
    check_choice("split", split, ("train", "test"))
    check_choice("kind", kind, ("images", "labels"))
    name, md5 = FILES[(split, kind)]
    dirs = search_dirs(data_dir)
    for d in dirs:
        if (d / name).is_file():
            verify_md5(d / name, md5)
            return d / name
        raw = d / name.removesuffix(".gz")
        if raw.is_file():
            verify_md5(raw, RAW_MD5[(split, kind)])
            return raw
    if not download_missing:
        raise MNISTNotFoundError(_missing_message([name], dirs, "Downloading is disabled (download=False)."))
    try:
        return download(name, cache_dir(), md5, mirrors, timeout)
    except MNISTNotFoundError as err:
        raise MNISTNotFoundError(_missing_message([name], dirs, f"Download failed (offline?): {err}")) from err


@functools.lru_cache(maxsize=8)
def _load_pair(images: Path, labels: Path, stamp: tuple) -> tuple[Tensor, Tensor]:
    x, y = read_idx(images), read_idx(labels)
    if x.shape[0] != y.shape[0]:
        raise IDXFormatError(f"{images} has {x.shape[0]} images but {labels} has {y.shape[0]} labels")
    return x, y.long()


def load_mnist(split: str = "test", data_dir=None, download_missing: bool = True,
               mirrors: Sequence[str] = MIRRORS, timeout: float = 5.0) -> tuple[Tensor, Tensor]:
    """Images ``uint8 [N, 28, 28]`` and labels ``int64 [N]`` of the official ``split``
    ('train': 60k, 'test': 10k); parsed once per process."""
    paths = [find_file(split, kind, data_dir, download_missing, mirrors, timeout) for kind in ("images", "labels")]
    stamp = tuple((p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    return _load_pair(paths[0], paths[1], stamp)


@dataclass(frozen=True)
class MNISTData:
    """Flattened images in [0, 1] (``[N, 784]`` float32) and labels, for training and evaluation."""

    train_x: Tensor
    train_y: Tensor
    eval_x: Tensor
    eval_y: Tensor
    source: str  # '10k split' or '60k train / 10k test'


@functools.lru_cache(maxsize=4)
def _cached_split(split: str, train_size: int, data_dir: tuple, download_missing: bool) -> MNISTData:
    def flat(x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1).to(torch.float32) / 255.0

    if split in ("full", "auto"):
        try:
            tx, ty = load_mnist("train", data_dir, download_missing)
            ex, ey = load_mnist("test", data_dir, download_missing)
            return MNISTData(flat(tx), ty, flat(ex), ey, "60k train / 10k test")
        except MNISTNotFoundError:
            if split == "full":
                raise
            log.warning("the 60k MNIST training set is not available: using the 10k split only")
    x, y = load_mnist("test", data_dir, download_missing)
    order = torch.randperm(x.shape[0], generator=derived_generator(0, "mnist-split"))
    train, held = order[:train_size], order[train_size:]
    return MNISTData(flat(x[train]), y[train], flat(x[held]), y[held], "10k split")


def mnist_data(split: str = "test10k", train_size: int = 8000, data_dir=None,
               download_missing: bool = True) -> MNISTData:
    """The training and evaluation sets of ``split`` ('test10k' | 'full' | 'auto'); for 'test10k'
    a fixed permutation of the 10k test set gives ``train_size`` training images, the rest evaluate."""
    check_choice("split", split, SPLITS)
    check_int("train_size", train_size, low=1, high=9999)
    if data_dir is not None:
        check_data_dirs([data_dir] if isinstance(data_dir, (str, os.PathLike)) else data_dir)
    dirs = tuple(str(d) for d in search_dirs(data_dir))  # the cache key follows the environment
    return _cached_split(split, int(train_size), dirs, bool(download_missing))


# ----------------------------------------------------------------------------- the environment
@dataclass
class MNISTEnv(ContextualEnv):
    """The MNIST contextual bandit: contexts are ids of training images (uniform, per seed), the
    policy sees their pixels, R = 1[a = y]; the error is the greedy test error on ``eval_size``
    evaluation images. The images are read on first use (``data``): building it stays cheap."""

    population: int
    split: str = "test10k"
    train_size: int = 8000
    eval_size: int = 2000  # 0 = the whole evaluation split
    data_dir: str | None = None
    download: bool = True

    n_actions = 10

    @functools.cached_property
    def data(self) -> MNISTData:
        return mnist_data(self.split, self.train_size, self.data_dir, self.download)

    @property
    def eval_x(self) -> Tensor:
        n = self.data.eval_x.shape[0] if self.eval_size == 0 else min(self.eval_size, self.data.eval_x.shape[0])
        return self.data.eval_x[:n]

    @property
    def eval_y(self) -> Tensor:
        return self.data.eval_y[: self.eval_x.shape[0]]

    def reset(self, generator):
        _ = self.data  # read the images (or report them missing) before the first step, not during it

    def sample_contexts(self, n, generator):
        return torch.randint(0, self.data.train_x.shape[0], (self.population, n), generator=generator)

    def labels(self, contexts):
        return self.data.train_y[contexts]

    @property
    def spec(self) -> ContextVectorSpec:
        return ContextVectorSpec(PIXELS, self.n_actions)

    def features(self, contexts, dtype=torch.float32):
        """``[S, n, 784]`` pixels of image ids ``[S, n]``."""
        flat = self.data.train_x.index_select(0, contexts.reshape(-1))  # several times faster than x[contexts]
        return flat.view(*contexts.shape, flat.shape[-1]).to(dtype)

    def evaluate(self, logits_of, dtype):
        """Greedy test error on the evaluation images, and the size of the training set used."""
        error = (logits_of(self.eval_x.to(dtype)).argmax(-1) != self.eval_y).to(torch.float32).mean(-1)
        return {"error": error, "train_images": torch.full_like(error, float(self.data.train_x.shape[0]))}


__all__ = ["FILES", "MIRRORS", "ChecksumError", "IDXFormatError", "MNISTData", "MNISTEnv", "MNISTError",
           "MNISTNotFoundError", "cache_dir", "download", "find_file", "load_mnist", "mnist_data", "parse_idx",
           "read_idx", "search_dirs", "verify_md5"]
