"""Compare every job of new data files with the same job in the committed (old) ones.

python compare_frames.py OLD_DIR NEW_DIR FIGURE...

For each job both files hold: the frame must be equal in every column the old one has but
wall_time (new columns are listed), and the metadata may differ only in seconds/cpu_seconds.
Exits 1 on any other difference.
"""
import sys
from pathlib import Path

import pandas as pd

from sandbox.analysis import figure_data

old_dir, new_dir, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
bad = 0
for name in names:
    old = {j: (f, e) for j, f, e, _ in figure_data.read_jobs(old_dir / f"{name}.parquet")}
    same = gained = 0
    for job, frame, entry, why in figure_data.read_jobs(new_dir / f"{name}.parquet"):
        if frame is None or job not in old:
            print(f"{name} {job}: {'damaged: ' + why if frame is None else 'not in the old file'}")
            bad += 1
            continue
        f0, e0 = old[job]
        cols = [c for c in f0.columns if c != "wall_time"]
        extra = sorted(set(frame.columns) - set(f0.columns))
        gained += bool(extra)
        try:
            pd.testing.assert_frame_equal(f0[cols], frame[cols], check_dtype=True)
        except (AssertionError, KeyError) as err:
            print(f"{name} {job}: frame differs: {str(err).splitlines()[:3]}")
            bad += 1
            continue
        meta = {k for k in set(e0["metadata"]) | set(entry["metadata"])
                if e0["metadata"].get(k) != entry["metadata"].get(k)} - {"seconds", "cpu_seconds"}
        if meta:
            print(f"{name} {job}: metadata differs in {sorted(meta)}")
            bad += 1
            continue
        same += 1
    print(f"{name}: {same} of {len(old)} committed jobs identical (but wall_time), {gained} with new columns")
sys.exit(1 if bad else 0)
