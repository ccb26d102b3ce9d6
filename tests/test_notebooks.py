"""Every figure end to end at quick fidelity: sweep, notebook (nbclient), PNG + PDF, claims — and
again with one seed of every configuration diverged, which every claim must count, not drop."""

from __future__ import annotations

import dataclasses
import shutil
import sys

import numpy as np
import pytest

from sandbox.core.processes import stop_ray
from sandbox.jobs.store import ResultsStore
from sandbox.reproduce import reproduce
from sandbox.runtime.config import RunConfig
from simulations import select

pytestmark = pytest.mark.slow  # the suite's longest tests: tests/conftest.py starts them first


def spread_shared_jobs(figures) -> list:
    """The figures in their registry order, except that one sharing a quick job with a figure before it
    goes to the end: two xdist workers take neighbouring tests at once, and a figure whose jobs another
    worker is computing waits for them with its core idle (the shared results folder's claims)."""
    first, later, seen = [], [], set()
    for figure in figures:
        ids = {j.id for j in figure.jobs("quick")}
        (later if ids & seen else first).append(figure)
        seen |= ids
    return first + later


#: figures whose jobs start Ray run in the same xdist worker as the Ray tests (one Ray at a time);
#: the others anywhere (that worker's queue is the suite's longest)
FIGURES = [pytest.param(f.name, marks=pytest.mark.xdist_group("ray"))
           if any(j.fn.startswith("sandbox.runtime.ray_async:") for j in f.jobs("quick")) else f.name
           for f in spread_shared_jobs(select())]
#: columns that say what a row is, not what was measured
IDENTITY = {"run_id", "label", "step", "member", "seed", "replicate", "wall_time", "diverged"}
CONFIG_FIELDS = {f.name for f in dataclasses.fields(RunConfig)}


def plant_diverged_seed(store: ResultsStore, jobs) -> list[str]:
    """In every training job's result, make the first seed (the smallest seed, member 0) diverge
    after its first logged step, as the loop logs a diverged member: its metrics NaN, ``diverged``
    True — and stop there, as a job whose every member diverged stops early (the shape of a
    paper-tier per-seed job): its rows after that step are removed. Per-seed jobs get one diverged
    seed per configuration, batched ones one member each. The planted result keeps the code stamp
    of the result it replaces (its components' fingerprints): stamped with this process's
    ``job_code()`` instead, it was judged by the bytes of every module imported here, and an edit to
    any of them before the notebook read it (a commit during the suite) had it recomputed — the
    planted seed gone. Returns the ids of the jobs changed."""
    frames = {j.id: store.read(j.id) for j in jobs}
    training = {k: f for k, f in frames.items() if {"member", "diverged", "step"} <= set(f.columns)}
    if not training:
        return []
    first_seed = min(int(f["seed"].min()) for f in training.values())
    changed = []
    for job_id, frame in training.items():
        meta = set(next(j for j in jobs if j.id == job_id).params.get("meta", {}))
        rows = (frame["seed"] == first_seed) & (frame["member"] == 0) & (frame["step"] > frame["step"].min())
        metrics = [c for c in frame.columns if frame[c].dtype.kind == "f" and c not in IDENTITY | meta
                   and c.split(".")[0] not in CONFIG_FIELDS]
        if not rows.any() or not metrics:
            continue
        frame.loc[rows, metrics] = np.nan
        frame.loc[rows, "diverged"] = True
        stop = np.sort(frame.loc[rows, "step"].unique())[0]  # the step it diverged at: nothing logged after it
        frame = frame[~(rows & (frame["step"] > stop))].reset_index(drop=True)
        store.write(job_id, frame, store.metadata(job_id), store.code(job_id))
        changed.append(job_id)
    return changed


@pytest.fixture(autouse=True)
def no_ray_left_running():
    """A figure whose jobs start Ray (in this process: one worker) stops it when its test ends, so the
    tests after it in this xdist worker find no Ray up (a job run while Ray is up is costed as a Ray
    job; a --ray-address would find this process joined already)."""
    up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    yield
    if not up and "ray" in sys.modules and sys.modules["ray"].is_initialized():
        stop_ray()


@pytest.fixture(scope="session")
def shared_results(tmp_path_factory):
    """One results folder for every figure in every xdist worker of the session: a job that several
    figures share runs once (the store's claims make a second sweep wait for it, not rerun it)."""
    return tmp_path_factory.getbasetemp().parent / "quick-results"


@pytest.mark.parametrize("name", FIGURES)
def test_figure_reproduces_and_its_claims_pass_and_count_a_diverged_seed(name, tmp_path, shared_results):
    if name.startswith("mnist"):
        from sandbox.envs.mnist import find_test_split

        if find_test_split() is None:
            pytest.skip("the MNIST test split was not found: put t10k-images-idx3-ubyte.gz and "
                        "t10k-labels-idx1-ubyte.gz in ../shared/data/mnist or set SANDBOX_MNIST_DIR")
    run = dict(fidelity="quick", notebooks_dir=tmp_path / "notebooks", workers=1, progress=False)
    (outcome,) = reproduce([name], figures_dir=tmp_path / "figures", results_dir=shared_results, **run)
    assert outcome.error is None, outcome.error
    assert outcome.claims, "the notebook recorded no claims"
    failed = [f"{c.name}: {c.interval}" for c in outcome.claims if c.passed is False]
    assert not failed, failed
    assert {p.suffix for p in outcome.files} == {".png", ".pdf"}
    assert (tmp_path / "notebooks").glob("*.ipynb")

    # every seed counts: the same figure with one seed of each configuration diverged (in a copy of its results)
    jobs = select([name])[0].jobs("quick")
    shared, own = ResultsStore(shared_results), ResultsStore(tmp_path / "results")
    for job_id in {j.id for j in jobs}:
        shutil.copy2(shared.path(job_id), own.path(job_id))
    changed = plant_diverged_seed(own, jobs)
    if not changed:
        return  # no training run behind this figure (closed forms, exact moments)
    (planted,) = reproduce([name], figures_dir=tmp_path / "planted", results_dir=own.root, rerun=True, **run)
    recomputed = [j for j in changed if not own.read(j)["diverged"].any()]
    assert not recomputed, f"the planted results of {recomputed} were recomputed, not read: no seed diverged"
    assert planted.claims, f"with a diverged seed the notebook crashed: {planted.error}"
    assert planted.error is None or any(c.passed is False for c in planted.claims), planted.error
    seeds = {c.name: c.n for c in outcome.claims}
    assert {c.name: c.n for c in planted.claims} == seeds, "a claim lost or gained seeds: a NaN seed was dropped"
    over_seeds = [c for c in planted.claims if c.n]
    assert not over_seeds or sum(c.diverged for c in over_seeds) > 0, \
        "no claim over seeds counted the diverged seed"
