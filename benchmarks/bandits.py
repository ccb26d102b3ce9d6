"""Bandit throughput: the population path (S seeds as one tensor) against a per-seed loop.

Prints seed-steps per second for both, in the same run, and their ratio. Targets (issue 3, on 2
cores): the population path ≥ 20× the loop; 100 seeds × 1,000 steps of the 100-context × 10-arm
exact-gradient bandit in under 5 s.

    python benchmarks/bandits.py [--seeds 100] [--steps 1000] [--loop-seeds 10]
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train


def config(population: int, steps: int, mode: str, seed: int = 0) -> RunConfig:
    task = {"N": 100, "K": 10, "population": population, "mode": mode, "init_std": 1.0}
    if mode == "sampled":
        task.update(batch_size=100, samples_per_context=1)
    return RunConfig(task="bandit", task_kwargs=task, estimator="dg", advantage="constant", optimizer="normalized",
                     lr=0.1, steps=steps, log_points=10, seed=seed)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--loop-seeds", type=int, default=10, help="seeds timed in the per-seed loop")
    args = parser.parse_args()
    print(f"# bandit benchmark — N=100 contexts × K=10 arms, DG, normalised step; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    print(f"{'mode':<8} {'path':<12} {'seeds':>6} {'steps':>6} {'seconds':>8} {'seed-steps/s':>13}")
    results = {}
    for mode in ("exact", "sampled"):
        train(config(2, 5, mode))  # warm-up
        pop = timed(lambda m=mode: train(config(args.seeds, args.steps, m)))
        loop = timed(lambda m=mode: [train(config(1, args.steps, m, seed=s)) for s in range(args.loop_seeds)])
        rate_pop = args.seeds * args.steps / pop
        rate_loop = args.loop_seeds * args.steps / loop
        results[mode] = (pop, rate_pop / rate_loop)
        print(f"{mode:<8} {'population':<12} {args.seeds:>6} {args.steps:>6} {pop:>8.2f} {rate_pop:>13.0f}")
        print(f"{mode:<8} {'per-seed':<12} {args.loop_seeds:>6} {args.steps:>6} {loop:>8.2f} {rate_loop:>13.0f}")
        print(f"{mode:<8} {'ratio':<12} {'':>6} {'':>6} {'':>8} {rate_pop / rate_loop:>12.1f}x")
    seconds, ratio = results["exact"]
    print(f"\ntarget: {args.seeds} seeds × {args.steps} steps (exact) < 5 s: {seconds:.2f} s — "
          f"{'met' if seconds < 5 else 'NOT met'}")
    print(f"target: population ≥ 20× the per-seed loop (exact): {ratio:.1f}× — {'met' if ratio >= 20 else 'NOT met'}")
    print(f"        (sampled mode: {results['sampled'][1]:.1f}×)")


if __name__ == "__main__":
    main()
