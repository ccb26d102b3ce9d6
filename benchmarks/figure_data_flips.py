"""Single-byte flips in a committed per-seed data file: how many go unnoticed (issue 36).

Each flip damages one byte of a copy of the file (by default among its data pages, where issue 36
found 374 of 449 flips decoding silently to other numbers); the copy is then read as ``sandbox
reproduce`` restores it (``figure_data.read_jobs``: every job's row group verified against its
checksum). A flip is *named* when the jobs it damaged are reported (file and job) and every other
job comes back intact; *harmless* when every job comes back identical (a byte no reader uses);
*unnoticed* when a job comes back with other values without being named — the defect, target 0;
*crash* when reading raises instead of naming (also a defect).

    python benchmarks/figure_data_flips.py [paper_figures/data/gate.parquet] [--flips 400] [--all-bytes]
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

from sandbox.analysis.figure_data import read_jobs

ROOT = Path(__file__).resolve().parents[1]


def data_region(data: bytes) -> range:
    """The bytes of a parquet file's column chunks: after the leading magic, before the footer."""
    footer = struct.unpack("<i", data[-8:-4])[0]
    return range(4, len(data) - 8 - footer)


def outcome(path: Path, intact: dict[str, tuple]) -> tuple[str, int]:
    """How reading ``path`` went, and how many jobs were named damaged."""
    try:
        got = list(read_jobs(path))
    except ValueError:  # the index cannot be read: the file is named, no job restored
        return "named", len(intact)
    except Exception:  # noqa: BLE001 — anything else is a crash
        return "crash", 0
    named = 0
    for job_id, frame, entry, _why in got:
        if frame is None:
            named += 1
            continue
        frame0, meta0, code0 = intact[job_id]
        same = frame.equals(frame0) and list(frame.dtypes) == list(frame0.dtypes) and entry["metadata"] == meta0 \
            and entry["code"] == code0
        if not same:
            return "unnoticed", named
    return ("named" if named else "harmless"), named


def measure(path: Path, flips: int, seed: int, all_bytes: bool) -> Counter:
    data = path.read_bytes()
    intact = {job_id: (frame, entry["metadata"], entry["code"]) for job_id, frame, entry, why in read_jobs(path)}
    if any(frame is None for frame, _, _ in intact.values()):
        raise SystemExit(f"{path} is damaged already")
    region = range(len(data)) if all_bytes else data_region(data)
    positions = random.Random(seed).sample(list(region), min(flips, len(region)))
    counts: Counter = Counter()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        for at in positions:
            damaged = bytearray(data)
            damaged[at] ^= 1 << random.Random(seed + at).randrange(8)
            copy.write_bytes(bytes(damaged))
            what, named = outcome(copy, intact)
            counts[what] += 1
            counts["jobs named"] += named
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=str(ROOT / "paper_figures" / "data" / "gate.parquet"))
    parser.add_argument("--flips", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all-bytes", action="store_true", help="flip anywhere, footer and index included")
    args = parser.parse_args(argv)
    path = Path(args.path)
    with tempfile.TemporaryDirectory() as folder:  # never touch the committed file
        copy = Path(folder) / path.name
        shutil.copy(path, copy)
        counts = measure(copy, args.flips, args.seed, args.all_bytes)
    total = sum(counts[k] for k in ("named", "harmless", "unnoticed", "crash"))
    table = pd.DataFrame({"flips": [counts[k] for k in ("named", "harmless", "unnoticed", "crash")]},
                         index=["named (damaged job(s) reported)", "harmless (identical)", "UNNOTICED", "crash"])
    print(f"{path.name}: {total} single-byte flips in its {'bytes' if args.all_bytes else 'data pages'}")
    print(table.to_string())
    if counts["named"]:
        print(f"jobs named per named flip: {counts['jobs named'] / counts['named']:.1f} on average "
              "(a row group's jobs when it cannot be read; each is recomputed)")
    print(f"unnoticed: {counts['unnoticed']} of {total} (target 0); crashes: {counts['crash']}")
    return 1 if counts["unnoticed"] or counts["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
