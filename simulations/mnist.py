"""Contaminated MNIST (shared/spec/figures.md, "MNIST"): mnist-learning, mnist-samples-per-image,
mnist-alignment, mnist-staleness.

Every run is the actor-learner loop on the ``mnist`` task (an MLP 784 → 100 → 10, Adam 1e-3,
B = 100 images per step, the Σπ² baseline) with the seeds as one batched population. The
learning and alignment figures share their runs; so do the one-sample points of the
samples-per-image figure and the D = 0 points of the staleness figure (equal configs, one job).
Every run also probes REINFORCE's and DG's batch gradients on its own batches at its logged
steps, so alignment can compare the estimators at the same parameters.

Quick fidelity uses the 10k test split only (8k images train, 2k evaluate); full fidelity uses the
60k training set when it can be found or downloaded (``split='auto'``) and says which it used.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from sandbox.jobs.seeds import SEED_STRIDE
from sandbox.jobs.sweep import Job, intra_op_threads
from sandbox.methods import method
from sandbox.runtime.config import RunConfig
from simulations import Figure, register_figure

FIDELITY = {
    "quick": {"seeds": 10, "steps": 400, "log_points": 10, "samples": (1, 10), "exact_dg": False,
              "confirm": False, "delays": (0, 200), "sync_shortcut": True, "split": "test10k", "eval_size": 2000, "seed": 0},
    # the papers' 10k steps and B = 100 at 10 seeds; pruned with the other families: samples
    # per image 1, 10, 100 (+ PG's exact floor), delays 0, 30, 1000 (README, "Paper fidelity")
    "paper": {"seeds": 10, "steps": 10_000, "log_points": 40, "samples": (1, 10, 100), "exact_dg": False,
              "confirm": True, "delays": (0, 30, 1000), "sync_shortcut": True, "split": "auto", "eval_size": 0,
              "seed": 0},
    "full": {"seeds": 10, "steps": 10_000, "log_points": 40, "samples": (1, 2, 5, 10, 20, 50, 100), "exact_dg": True,
             "confirm": True, "delays": (0, 1, 3, 10, 30, 100, 300, 1000), "sync_shortcut": False, "split": "auto",
             "eval_size": 0, "seed": 0},
}
LR, BATCH = 1e-3, 100
#: P1's and P2's MNIST budget as a third-party summary reads it (simulations/data/PUBLISHED.md)
PAPER_STEPS = 10_000
PROBES = ("reinforce", "dg")
#: label → RunConfig fields of the method (the one method table, ``sandbox.scoring.recipes``). PG is
#: the papers' PG (token-level IS with the recorded μ): on-policy, one update per fresh batch, it is
#: REINFORCE; CE is the supervised oracle (``xent``)
LEARNING = (("PG", method("PG")), ("DG", method("DG")), ("CE", {"estimator": "xent"}))

#: label → (RunConfig fields, task overrides). VCPO keeps its ratio and its ESS-scaled step but takes
#: the figures' Σπ² baseline: the minimum-variance baseline is per group, and one sample per image
#: makes every group a single row (A = 0) — a variant, hence its own name
_VCPO = {k: v for k, v in method("VCPO").items() if k not in ("advantage", "advantage_kwargs")}
STALENESS = {
    "REINFORCE": (method("REINFORCE"), {}),
    "IS-PG (exact μ)": (method("IS-PG"), {"behavior": "true"}),
    "TIS": (method("TIS"), {}),
    "PPO": (method("PPO"), {}),
    "VCPO (Σπ² baseline)": (_VCPO, {}),
    "GAC": (method("GAC"), {}),
    "DG": (method("DG"), {}),
}
#: on-policy (D = 0) these are REINFORCE: every ratio π_θ/μ is 1, so IS-PG, TIS and VCPO's weights and
#: ESS are 1 and PPO's clip is inactive on its single update — at quick fidelity their D = 0 point
#: is REINFORCE's run (the notebook says so); full fidelity runs them all.
SYNC_IDENTICAL = ("IS-PG (exact μ)", "TIS", "PPO", "VCPO (Σπ² baseline)")
#: runs shared between figures keep one label everywhere (a stored result carries the label it was
#: computed under): the synchronous REINFORCE and DG runs are "PG" and "DG"
SHARED = {"REINFORCE": "PG", "DG": "DG"}
#: label suffix of the samples figure's confirmation runs, at seed + SEED_STRIDE (one base seed on)
CONFIRM = f" (seeds +{SEED_STRIDE})"


def train_run(**params) -> pd.DataFrame:
    """A training job on one intra-op thread: an MNIST step is many small kernels, and two threads
    on a shared two-core machine run them several times slower (see benchmarks/mnist.py); run
    jobs side by side with ``$SANDBOX_WORKERS`` instead."""
    from sandbox.runtime.loop import train

    with intra_op_threads(1):
        return train(RunConfig.from_dict(params))


def job(config: RunConfig) -> Job:
    params = config.to_dict()
    params.pop("label")
    return Job("simulations.mnist:train_run", params, config.label or config.estimator)


def task_kwargs(fidelity: str, **overrides) -> dict:
    f = FIDELITY[fidelity]
    return {"population": f["seeds"], "batch_size": BATCH, "split": f["split"], "eval_size": f["eval_size"],
            "probes": list(PROBES), **overrides}


def config(fidelity: str, label: str, fields: dict, staleness: int = 0, **task) -> RunConfig:
    """The run of method ``fields`` (RunConfig fields) under ``label``, with the figures' Σπ² baseline."""
    f = FIDELITY[fidelity]
    delayed = {"staleness": {"kind": "fixed", "D": staleness}, "history": "rollouts"} if staleness else {}
    return RunConfig(task="mnist", task_kwargs=task_kwargs(fidelity, **task), **fields, advantage="confidence",
                     optimizer="adam", lr=LR, steps=f["steps"], log_points=f["log_points"], seed=f["seed"], label=label,
                     **delayed)


def learning_runs(fidelity: str) -> list[RunConfig]:
    return [config(fidelity, label, fields) for label, fields in LEARNING]


def samples_runs(fidelity: str) -> list[RunConfig]:
    f = FIDELITY[fidelity]
    runs = []
    for m in f["samples"]:
        for label, fields in LEARNING[:2]:
            if m == 1:  # the learning figure's run, under its label
                runs.append(config(fidelity, label, fields))
            else:
                runs.append(config(fidelity, f"{label} m={m}", fields, samples_per_context=m))
    runs.append(config(fidelity, "PG exact", method("PG"), mode="exact"))
    if f["exact_dg"]:
        runs.append(config(fidelity, "DG exact", method("DG"), mode="exact"))
    if f["confirm"]:  # the spec's claim (DG@1 below PG's floor) again, on seeds the other runs never use
        for label, fields, task in (("DG", method("DG"), {}), ("PG exact", method("PG"), {"mode": "exact"})):
            runs.append(replace(config(fidelity, label + CONFIRM, fields, **task), seed=f["seed"] + SEED_STRIDE))
    return runs


def staleness_runs(fidelity: str) -> list[RunConfig]:
    f = FIDELITY[fidelity]
    runs = []
    for D in f["delays"]:
        for label, (fields, task) in STALENESS.items():
            if D == 0 and f["sync_shortcut"] and label in SYNC_IDENTICAL:
                continue
            if D == 0 and label in SHARED:  # the learning figure's run, under its label
                runs.append(config(fidelity, SHARED[label], dict(LEARNING)[SHARED[label]]))
            else:
                runs.append(config(fidelity, f"{label} D={D}", fields, D, **task))
    return runs


def label_parts(label: str) -> tuple[str, int]:
    """Staleness labels: 'IS-PG (exact μ) D=300' → ('IS-PG (exact μ)', 300); 'PG' → ('REINFORCE', 0)."""
    shared = {v: k for k, v in SHARED.items()}
    if label in shared:
        return shared[label], 0
    method, _, d = label.rpartition(" D=")
    return method, int(d)


def samples_parts(label: str) -> tuple[str, float]:
    """Samples-per-image labels: 'PG m=10' → ('PG', 10); 'DG' → ('DG', 1); 'PG exact' → ('PG', inf);
    a confirmation run (``CONFIRM``) parses as its method's."""
    label = label.removesuffix(CONFIRM)
    if label.endswith(" exact"):
        return label.removesuffix(" exact"), float("inf")
    method, _, m = label.partition(" m=")
    return method, float(m or 1)


#: the colour key (sandbox.analysis.plotting.METHOD_COLORS) of each method label
COLOR_KEYS = {"PG": "pg", "REINFORCE": "reinforce", "IS-PG (exact μ)": "is_pg", "TIS": "tis", "PPO": "ppo",
              "VCPO (Σπ² baseline)": "vcpo", "GAC": "gac", "DG": "dg", "CE": "ce"}


def method_color(label: str) -> str:
    from sandbox.analysis.plotting import color

    return color(COLOR_KEYS.get(label, label))


def save(fig, name: str, note: str):
    """``save_figure`` with a strip kept free under the axes for the note."""
    from sandbox.analysis.plotting import save_figure

    fig.get_layout_engine().set(rect=(0, 0.045, 1, 0.955))
    return save_figure(fig, name, note=note)


def data_note(frame: pd.DataFrame, fidelity: str) -> str:
    """The figure's note: fidelity, seeds, steps and which data the runs trained on."""
    n_train = int(frame["train_images"].dropna().max())
    data = "10k split only (8k train / 2k eval)" if n_train < 60000 else "60k train / 10k test"
    steps = int(frame["step"].max())
    return (f"fidelity={fidelity}, {frame['member'].nunique()} seeds, {steps:,} of the paper's {PAPER_STEPS:,} steps "
            f"(K = 10k per a third-party summary), MNIST {data}")


register_figure(Figure("mnist-learning", "mnist", "MNIST: test error vs step for PG, DG and CE",
                       lambda fid: [job(c) for c in learning_runs(fid)], "notebooks/mnist_learning.py"))
register_figure(Figure("mnist-alignment", "mnist", "MNIST: misalignment to the PG and CE oracles",
                       lambda fid: [job(c) for c in learning_runs(fid)], "notebooks/mnist_alignment.py"))
register_figure(Figure("mnist-samples-per-image", "mnist", "MNIST: final error vs samples per image",
                       lambda fid: [job(c) for c in samples_runs(fid)], "notebooks/mnist_samples_per_image.py"))
register_figure(Figure("mnist-staleness", "mnist", "MNIST: error under a stale actor (delay D)",
                       lambda fid: [job(c) for c in staleness_runs(fid)], "notebooks/mnist_staleness.py"))


__all__ = ["FIDELITY", "LEARNING", "STALENESS", "data_note", "method_color", "save", "label_parts", "samples_parts", "CONFIRM", "learning_runs", "samples_runs",
           "staleness_runs", "train_run"]
