"""Screening under staleness: the simulated delay against Ray's fixed-lag mode, same run.

The tiny Qwen2-style LM of the llm-staleness figure reverses three letters (8 prompts × 8 samples,
DG, Adam 3e-3) with the actor s learner versions behind — the same config, ``staleness={"kind":
"fixed", "D": s}``, run once in the in-process loop and once on Ray (one rollout worker,
fixed-lag). Prints both wall-clocks (Ray's start-up separately), their ratio, and whether every
logged number agrees bit for bit — the reason the README recommends simulated staleness for
screening and Ray for what only real asynchrony has.

    python benchmarks/simulated_staleness.py [--steps 100] [--staleness 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from sandbox.core.processes import start_ray
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.runtime.ray_async import AsyncConfig, train_async

TASK = {"env": "reverse", "env_kwargs": {"length": 3, "alphabet": "ab"}, "max_new_tokens": 3,
        "prompts_per_step": 8, "samples_per_prompt": 8, "eval_prompts": 64}


def shared_numbers(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The numeric columns both frames log (wall-clock and bookkeeping excepted)."""
    columns = [c for c in a.columns if c in b.columns and c not in ("wall_time", "run_id", "label")
               and pd.api.types.is_numeric_dtype(a[c])]
    return a[columns].to_numpy(float), b[columns].to_numpy(float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--staleness", type=int, default=4)
    args = parser.parse_args()
    if args.steps < 1 or args.staleness < 0:
        raise SystemExit("--steps must be ≥ 1 and --staleness ≥ 0")
    torch.set_num_threads(1)
    base = RunConfig(task="hf_text", task_kwargs=TASK, estimator="dg", lr=3e-3, steps=args.steps, log_points=8)
    train(base.replace(steps=1))  # warm-up: imports and first-call costs are paid by neither timing
    start = time.perf_counter()
    base = base.replace(staleness={"kind": "fixed", "D": args.staleness} if args.staleness else {})
    simulated = train(base)
    t_sim = time.perf_counter() - start
    start = time.perf_counter()
    start_ray(None, 3, progress=False)
    t_start = time.perf_counter() - start
    start = time.perf_counter()
    ray = train_async(base, AsyncConfig(n_workers=1))
    t_ray = time.perf_counter() - start
    a, b = shared_numbers(simulated, ray)
    same = a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    print(f"{'runtime':<28}{'seconds':>9}")
    print(f"{'simulated staleness':<28}{t_sim:>9.1f}")
    print(f"{'Ray fixed-lag (run)':<28}{t_ray:>9.1f}")
    print(f"{'Ray start-up':<28}{t_start:>9.1f}")
    print(f"\nRay / simulated: {t_ray / t_sim:.2f}x for the run, {(t_ray + t_start) / t_sim:.2f}x with start-up; "
          f"{a.size} logged numbers identical: {same}")


if __name__ == "__main__":
    main()
