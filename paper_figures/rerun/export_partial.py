"""Export the finished jobs of a resumable paper-tier rerun, per figure, as partial data files.

python export_partial.py STORE OUT_DIR FIGURE...   (run with the rerun's code on PYTHONPATH)

Each OUT_DIR/FIGURE.parquet holds that figure's jobs the store has finished (figure_data.export,
the figure's own DataSpec): copied into a --figures folder's data/, `sandbox reproduce` restores
them (figure_data.restore_figures accepts a file holding some of a figure's jobs) and runs the rest.
"""
import sys
from pathlib import Path

from sandbox.analysis import figure_data
from sandbox.jobs.store import ResultsStore
from sandbox.reproduce import figures

store_dir, out, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
store, registry = ResultsStore(store_dir), figures()
seen, done_all = set(), set()
for figure in registry.select(names):
    jobs = figure.jobs("paper")
    done = [j for j in jobs if store.state(j.id) == "ok"]
    seen |= {j.id for j in jobs}
    done_all |= {j.id for j in done}
    if done:
        figure_data.export(done, store, out / f"{figure.name}.parquet",
                           figure_data.DataSpec.of(getattr(figure, "data_spec", None)))
    print(f"{figure.name}: {len(done)} of {len(jobs)} jobs exported")
print(f"all: {len(done_all)} of {len(seen)} unique jobs")
