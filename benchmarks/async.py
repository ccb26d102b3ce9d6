"""Learner throughput, synchronous vs asynchronous (Ray), on the same model and task.

The tiny Qwen2-style LM of the llm-staleness figure, on reversal of 40 letters (41 sampled tokens
per answer, 8 prompts × 8 samples): long answers make sampling a large share of the step. Throughput is the
steady state: learner steps per second between step 10 and the last step, from the loop's own
wall-clock log (the one-off start of the Ray workers — a process importing torch and
transformers — is excluded and printed separately). Sync: the in-process loop, and Ray at
staleness 0 (one batch in flight: no overlap). Async: Ray at fixed staleness D ∈ {1, 2, 4},
so sampling of the next batches overlaps the update.
Target (issue 7, on 2 cores): async ≥ 1.3× sync.

    python benchmarks/async.py [--steps 60] [--workers 1] [--length 40]
"""

from __future__ import annotations

import argparse

import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train
from sandbox.runtime.ray_async import AsyncConfig, ensure_ray, train_async

WARMUP = 10


def steady_rate(frame, steps: int) -> float:
    rows = frame.drop_duplicates("step").set_index("step")["wall_time"]
    return (steps - WARMUP) / (rows.loc[steps] - rows.loc[WARMUP])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--length", type=int, default=40, help="letters to reverse (sampled tokens = length + 1)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = {"env": "reverse", "env_kwargs": {"length": args.length, "alphabet": "abcd"},
            "max_new_tokens": args.length + 1, "prompts_per_step": 8, "samples_per_prompt": 8, "eval_prompts": 8}
    cfg = RunConfig(task="hf_text", task_kwargs=task, estimator="dg", lr=1e-3, steps=args.steps, log_points=args.steps)
    ensure_ray(num_cpus=args.workers + 1)
    rows = [("sync (in-process loop)", steady_rate(train(cfg), args.steps), float("nan"))]
    for s in (0, 1, 2, 4):
        stale = cfg.replace(staleness={"kind": "fixed", "D": s} if s else {})
        frame = train_async(stale, AsyncConfig(n_workers=args.workers))
        first = frame.drop_duplicates("step").set_index("step")["wall_time"].loc[1]
        rows.append((f"ray, staleness D={s}", steady_rate(frame, args.steps), first))
    base = rows[1][1]
    print(f"# async benchmark — tiny LM, reversal of {args.length} letters ({args.length + 1} sampled tokens), "
          f"8×8 samples/step, steady state over steps {WARMUP}…{args.steps}, {args.workers} Ray rollout worker(s), "
          f"1 torch thread per process, torch {torch.__version__}")
    print(f"{'mode':<26} {'steps/s':>8} {'vs ray s=0':>11} {'vs in-process':>14} {'first step (s)':>15}")
    for name, rate, first in rows:
        print(f"{name:<26} {rate:>8.2f} {rate / base:>10.2f}x {rate / rows[0][1]:>13.2f}x {first:>15.2f}")
    best = max(r[1] for r in rows[2:])
    print(f"\ntarget: async ≥ 1.3× sync: best {best / base:.2f}× Ray s=0, {best / rows[0][1]:.2f}× the in-process loop — "
          f"{'met' if best / max(base, rows[0][1]) >= 1.3 else 'NOT met'}")
    print("(first step: the learner's wait for its first batch, which includes starting the Ray workers)")


if __name__ == "__main__":
    main()
