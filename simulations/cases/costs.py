"""What the cases cost: CPU seconds per learner step and per evaluation at each scale of the case
file, measured on one thread, and each case's total at quick and paper fidelity (issue 32).

``python -m simulations.cases.costs`` measures (``time.process_time``: CPU time of this process,
not wall time, so that a loaded machine does not inflate it) and prints the tables of
docs/predictions.md ("Cost"). A step is one rollout (10 prompts × the group size, under a bf16
``measured_mismatch``) plus one learner update (``tis``); an evaluation is the fidelity's batch.
A case's cost is Σ over the scales, arms and seeds it runs (``scale_runs``) of steps × step +
evaluations × evaluation, one seed at a time (estimators and controllers differ by a few percent,
not modelled; a batched population of seeds costs about half as much per seed, and runs two cases
share are counted in each).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner, log_schedule
from simulations.cases import load_cases, scale_runs, steps_of

GROUPS = (8, 16)


def measure(scale: str, group: int, steps: int = 3) -> dict[str, float]:
    """CPU seconds of one step (after a first, warm-up step) and of one evaluation at each fidelity."""
    cf = load_cases()
    task = cf.mapping["scales"][scale]
    out = {}
    for fidelity, fid in cf.mapping["fidelity"].items():
        cfg = RunConfig(task=task["task"], task_kwargs={**task["task_kwargs"], **fid["eval"], "samples_per_prompt": group},
                        estimator="tis", steps=steps + 1, seed=0, frictions=(("measured_mismatch", {"token_kl": 1e-3}),))
        learner = ActorLearner(cfg)
        if "step" not in out:
            times = []
            for step in range(steps + 1):
                t0 = time.process_time()
                learner.update(step, learner.rollout(step))
                learner.after_update(step + 1)
                times.append(time.process_time() - t0)
            out["step"] = float(np.mean(times[1:]))
        t0 = time.process_time()
        learner.evaluate(0)
        out[f"eval_{fidelity}"] = time.process_time() - t0
    return out


def case_costs(measured: dict[tuple[str, int], dict[str, float]]) -> dict[str, dict[str, float]]:
    """CPU seconds of every case at each fidelity from ``measured[(scale, group)]``."""
    cf = load_cases()
    costs = {}
    for case in cf.cases:
        costs[case.id] = {}
        for fidelity in cf.mapping["fidelity"]:
            total = 0.0
            for scale, runs in scale_runs(case, cf.mapping, fidelity).items():
                m = measured[(scale, case.group_size or 8)]
                steps = steps_of(case, cf.mapping, fidelity, scale)
                evals = len(log_schedule(steps, runs.log_points)) if runs.arms else 0
                total += len(runs.arms) * len(runs.seeds) * (steps * m["step"] + evals * m[f"eval_{fidelity}"])
            costs[case.id][fidelity] = total
    return costs


def main() -> None:
    torch.set_num_threads(1)
    cf = load_cases()
    measured = {(s, g): measure(s, g) for s in cf.mapping["scales"] for g in GROUPS}
    print("| scale | answer tokens × V | group | CPU s / step | CPU s / evaluation, quick | paper |")
    print("|---|---|---|---|---|---|")
    for (scale, group), m in measured.items():
        kw = cf.mapping["scales"][scale]["task_kwargs"]
        print(f"| {scale} | {kw.get('think', 0) + kw['H']} × {kw.get('V', 2)} | {group} | {m['step']:.3f} "
              f"| {m['eval_quick']:.3f} | {m['eval_paper']:.3f} |")
    print()
    costs = case_costs(measured)
    print("| case | quick, CPU min | paper, CPU h |")
    print("|---|---|---|")
    for cid, c in costs.items():
        print(f"| {cid} | {c['quick'] / 60:.1f} | {c['paper'] / 3600:.1f} |")
    print(f"| **total** | **{sum(c['quick'] for c in costs.values()) / 60:.1f}** "
          f"| **{sum(c['paper'] for c in costs.values()) / 3600:.1f}** |")


if __name__ == "__main__":
    main()
