"""Kondo screening (shared/spec/figures.md, "kondo"): error vs backward-pass compute.

Kondo keeps the top ``pct`` of tokens by a priority (delight χ = A·ℓ, or uniformly at random as
a control) and the screened trainer runs the differentiable forward and backward only on the rows
that hold a kept token; ``kondo_compute`` measures what one update costs, screened vs unscreened.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from sandbox.advantages import make_advantage
from sandbox.core.seeding import derived_generator
from sandbox.estimators import make_estimator
from sandbox.jobs.sweep import Job, intra_op_threads
from sandbox.runtime.actor import collect
from sandbox.runtime.learner import learner_loss
from sandbox.tasks import make_task
from simulations import Figure, Plan, register_figure
from simulations.sequences import FIDELITY, run_jobs


def kondo_plan(fidelity: str) -> Plan:
    """Kondo at each pct by delight and the uniform controls (tags: priority, pct), DG at full
    fidelity, and the compute measurement."""
    f = FIDELITY[fidelity]
    plan = []
    for priority, pcts in (("delight", f["kondo_pcts"]), ("uniform", f["kondo_controls"])):
        for pct in pcts:
            spec = {"estimator": "kondo", "estimator_kwargs": {"pct": pct, "priority": priority}}
            plan.append(({"pct": pct, "priority": priority},
                         run_jobs(fidelity, f"Kondo {priority} {pct:.0%}", H=f["H"], steps=f["steps"], spec=spec,
                                  task={"backward": "screened", "seq_error": False})))
    if f["kondo_dg"]:
        plan.append(({"pct": 1.0, "priority": "DG"}, run_jobs(fidelity, "DG", H=f["H"], steps=f["steps"])))
    plan.append(({}, [Job("simulations.kondo:kondo_compute",
                          {"H": f["timing_H"], "pcts": list(f["timing_pcts"]), "reps": f["timing_reps"]}, "compute")]))
    return plan


def kondo_compute(H: int = 10, pcts: tuple = (0.03, 0.1, 0.3, 1.0), reps: int = 20, seed: int = 0) -> pd.DataFrame:
    """Cost of one learner update (scores, loss, backward) with Kondo screening vs the
    unscreened estimator on the same batch (reversal H, the spec model, 10 × 10 rows):
    FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and attention,
    forward and backward), the fraction of rows and tokens that ran the backward pass, and the
    median wall time over ``reps`` repetitions (single thread)."""
    from torch.utils.flop_counter import FlopCounterMode

    with intra_op_threads(1):
        tasks = {mode: make_task("reverse_copy", H=H, backward=mode) for mode in ("full", "screened")}
        params = [p.requires_grad_(True) for p in tasks["full"].init_params(derived_generator(seed, "init"))]
        # a partly trained policy would do; a fresh one has the same row structure
        rollout = collect(tasks["full"], [p.detach() for p in params], 0, derived_generator(seed, "rollout"), seed)
        advantage = make_advantage("group_mean")
        rows = []
        for pct in pcts:
            est = make_estimator("kondo", pct=pct)
            for mode, task in tasks.items():
                def update(task=task, est=est):
                    _, out = learner_loss(task, est, params, rollout, advantage, derived_generator(seed, "est"), False)
                    torch.autograd.grad(out.loss, params)
                    return out

                with FlopCounterMode(display=False) as counter:
                    out = update()
                times = []
                for _ in range(reps):
                    start = time.perf_counter()
                    update()
                    times.append(time.perf_counter() - start)
                rows.append({"pct": pct, "mode": mode, "flops": counter.get_total_flops(),
                             "seconds": float(np.median(times)),
                             "kept_tokens": float(out.metrics["kept_frac"].mean()),
                             "kept_rows": float(out.metrics["kept_rows_frac"].mean()),
                             "backward_rows": float(out.metrics["backward_rows_frac"].mean())
                             if "backward_rows_frac" in out.metrics else 1.0})
    return pd.DataFrame(rows)


register_figure(Figure("kondo", "sequences", "Kondo screening: error vs backward-pass compute", None,
                       "notebooks/kondo.py", plan=kondo_plan))

__all__ = ["kondo_compute", "kondo_plan"]
