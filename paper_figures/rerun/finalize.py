"""Bring a finished rerun of the 5-figure group (a --figures folder outside the repository) into the
repository's paper_figures, keeping everything else of it.

python finalize.py RERUN_FIGS REPO_PAPER_FIGURES    (repository's sandbox on PYTHONPATH)

- copies the 5 data files and figure files;
- CLAIMS.md: the repository's, with the 5 figure rows taken from the rerun's; checks the rerun's claim
  rows and headline rows of those figures equal the repository's (a changed claim stops it);
  the compute line recomputed from the data files (as sandbox.claims_file does), the rerun's
  "The invocation that wrote this file ..." sentence kept;
- claims.json: the rerun's, after checking every entry equals the repository's (but an empty label).
"""
import json
import re
import shutil
import sys
from pathlib import Path

from sandbox.analysis.figure_data import job_seconds_in
from sandbox.claims_file import Previous, _cells, _hours, _seconds

NAMES = ["reversal-learning", "reversal-scaling", "frictions", "reference-match", "actor-bug-map"]
rerun, repo = Path(sys.argv[1]), Path(sys.argv[2])

old_text, new_text = (repo / "CLAIMS.md").read_text(), (rerun / "CLAIMS.md").read_text()
old, new = Previous.read_text(old_text), Previous.read_text(new_text)
for name in NAMES:
    assert old.claim_rows[name] == new.claim_rows[name], f"{name}: claim rows differ"
    assert [r for r, f in old.headline_rows if name in f] == [r for r, f in new.headline_rows if name in f], name
    assert "-dirty" not in new.figure_rows[name], new.figure_rows[name]

for name in NAMES:
    shutil.copy2(rerun / "data" / f"{name}.parquet", repo / "data" / f"{name}.parquet")
    for ext in ("pdf", "png"):
        if (rerun / f"{name}.{ext}").is_file():
            shutil.copy2(rerun / f"{name}.{ext}", repo / f"{name}.{ext}")

text = old_text
for name in NAMES:
    text = text.replace(old.figure_rows[name], new.figure_rows[name])
rows = Previous.read_text(text).figure_rows
job_time = {}
for path in sorted((repo / "data").glob("*.parquet")):
    job_time.update(job_seconds_in(path))
notebooks = sum(_seconds(_cells(row)[4]) for row in rows.values())
total = sum(job_time.values())
invocation = re.search(r" The invocation that wrote this file ran .*?\(finished jobs and unchanged notebooks are "
                       r"reused, not rerun\)\.", new_text).group(0)
compute = (f"Compute: {_hours(total)} of job time + {_hours(notebooks)} of notebooks; at 1 worker that is about "
           f"{_hours(total + notebooks)} of wall time (a job shared by two figures counts once here, in each "
           f"figure's row below).{invocation}")
text = re.sub(r"^Compute: .*$", lambda _: compute, text, count=1, flags=re.M)
(repo / "CLAIMS.md").write_text(text)
print(compute)

old_json, new_json = json.loads((repo / "claims.json").read_text()), json.loads((rerun / "claims.json").read_text())
strip = lambda entries: [{k: v for k, v in e.items() if k != "label"} for e in entries]  # noqa: E731
others_old = [e for e in old_json if e["figure"] not in NAMES]
others_new = [e for e in new_json if e["figure"] not in NAMES]
assert strip(others_old) == strip(others_new), "claims.json: another figure's entries differ: merge by hand"
assert strip([e for e in old_json if e["figure"] in NAMES]) == strip([e for e in new_json if e["figure"] in NAMES]), \
    "claims.json: the 5 figures' claims changed"
shutil.copy2(rerun / "claims.json", repo / "claims.json")
print("claims.json: the rerun's (the 5 figures' entries unchanged but an empty 'label')")
