"""Learner throughput, synchronous vs asynchronous (Ray), on the same model and task.

The tiny Qwen2-style LM of the llm-staleness figure on 3-letter reversal, where generation
dominates the step. Sync: the in-process loop, and Ray with max_staleness = 0 (one batch in
flight: no overlap). Async: Ray with max_staleness ∈ {1, 2, 4} and two rollout workers, so
sampling of the next batches overlaps the update. Target (issue 7, on 2 cores): async ≥ 1.3× sync.

    python benchmarks/async.py [--steps 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.runtime.ray_async import AsyncConfig, ensure_ray, train_async

TASK = {"env": "reverse", "env_kwargs": {"length": 3, "alphabet": "ab"}, "max_new_tokens": 3,
        "prompts_per_step": 8, "samples_per_prompt": 8, "eval_prompts": 16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = RunConfig(task="hf_text", task_kwargs=TASK, estimator="dg", lr=3e-3, steps=args.steps, log_points=1)
    ensure_ray(num_cpus=args.workers + 1)
    train_async(cfg.replace(steps=3), AsyncConfig(n_workers=args.workers))  # warm-up: imports, actors
    rows = []
    start = time.perf_counter()
    train(cfg)
    rows.append(("sync (in-process loop)", time.perf_counter() - start, float("nan")))
    for s in (0, 1, 2, 4):
        start = time.perf_counter()
        frame = train_async(cfg, AsyncConfig(n_workers=args.workers, max_staleness=s))
        rows.append((f"ray, max_staleness={s}", time.perf_counter() - start, frame.learner_wait_seconds.iloc[0]))
    base = rows[1][1]
    print(f"# async benchmark — tiny LM, reversal of 3 letters, 8×8 samples/step, {args.steps} steps, "
          f"{args.workers} Ray rollout workers, 1 torch thread per process")
    print(f"{'mode':<26} {'seconds':>8} {'steps/s':>8} {'vs ray s=0':>11} {'learner waiting':>16}")
    for name, seconds, wait in rows:
        print(f"{name:<26} {seconds:>8.2f} {args.steps / seconds:>8.2f} {base / seconds:>10.2f}x "
              f"{wait / seconds if wait == wait else float('nan'):>15.0%}")
    best = max(base / r[1] for r in rows[2:])
    print(f"\ntarget: async ≥ 1.3× sync (Ray s=0): best {best:.2f}× — {'met' if best >= 1.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
