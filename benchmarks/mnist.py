"""Throughput of the MNIST actor-learner loop and the memory of staleness.

    python benchmarks/mnist.py                  # about 2 minutes on 2 cores
    python benchmarks/mnist.py --steps 300 --threads 1,2

1. One run (population S = 1, B = 100 images, the full loop: actor, Σπ² baseline, DG, Adam):
   steps/s, and the time of a full-fidelity run (10k steps) extrapolated from ``--steps`` steps.
   Target: under 60 s.
2. A population of 10 seeds as one batched model vs 10 sequential single-seed runs, in the same
   process: member-steps/s of each. Target: the population ≥ 3× the sequential throughput.
3. Staleness at D = 1000: the bytes a parameter ring of D + 1 MLP snapshots holds
   (``ParameterHistory.nbytes``, measured by filling it as the loop would) against the eager queue
   of D + 1 rollouts (``RolloutQueue.nbytes``, measured on a real run's queue after it filled).

Every timing is wall clock on this machine, which may be shared: read the ratios, not the digits.
The figures' sweeps run each job on one intra-op thread (``simulations.mnist.train_run``): with
other processes on the cores, two threads per run are several times slower, not faster.

Why the population gains less than one might hope: one S = 1 step is about 4 ms, of which the
first-layer matmuls (three 100×784×100 products: actor, learner, backward) run near the core's
peak; at S = 10 the matmuls scale with S and so does the loop's elementwise work over S × 79,510
parameters (Adam, finite checks, gradient flattening and cosines). Batching saves the per-step
dispatch overhead only, so the ratio is bounded by (S = 1 step time) / (per-member compute).
"""

from __future__ import annotations

import argparse
import time

import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.history import ParameterHistory
from sandbox.runtime.loop import ActorLearner, train

FULL_STEPS, RUN_TARGET_S, POPULATION_TARGET = 10_000, 60.0, 3.0


def config(population: int, steps: int, seed: int = 0, **extra) -> RunConfig:
    return RunConfig(task="mnist", task_kwargs={"population": population}, estimator="dg", advantage="confidence",
                     lr=1e-3, steps=steps, log_points=5, seed=seed, **extra)


def timed_run(population: int, steps: int, seed: int = 0) -> float:
    start = time.perf_counter()
    train(config(population, steps, seed))
    return time.perf_counter() - start


def throughput(steps: int, threads: int, members: int = 10) -> dict:
    torch.set_num_threads(threads)
    timed_run(1, 20)  # warm-up: data, allocator, kernels
    one = timed_run(1, steps)
    population = timed_run(members, steps)
    sequential = sum(timed_run(1, steps, seed=s + 1) for s in range(members))
    return {"threads": threads, "one_steps_s": steps / one, "full_run_s": one / steps * FULL_STEPS,
            "pop_member_steps_s": members * steps / population, "seq_member_steps_s": members * steps / sequential}


def queue_bytes(D: int, population: int) -> int:
    """Bytes of the eager queue of a real run with fixed delay D, right after it filled."""
    run = ActorLearner(config(population, D + 1, staleness={"kind": "fixed", "D": D}, history="rollouts"))
    return run.queue.nbytes()


def ring_bytes(D: int, population: int) -> int:
    """Bytes of the parameter ring the loop keeps for delay D (D + 1 snapshots), filled for real."""
    run = ActorLearner(config(population, 0))
    ring = ParameterHistory(D + 1)
    for version in range(D + 1):
        ring.push(version, run.params)
    return ring.nbytes()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per timed run")
    parser.add_argument("--threads", default="1", help="intra-op thread counts to time, e.g. 1,2")
    parser.add_argument("--delay", type=int, default=1000)
    args = parser.parse_args(argv)

    print(f"MNIST loop throughput ({args.steps} steps per timed run; a full run = {FULL_STEPS} steps, extrapolated)")
    print(f"{'threads':>7} {'1 run steps/s':>14} {'full run (s)':>13} {'pop 10 member-steps/s':>22} "
          f"{'10 sequential member-steps/s':>29} {'ratio':>6}", flush=True)
    verdicts = []
    for threads in (int(t) for t in args.threads.split(",")):
        r = throughput(args.steps, threads)
        ratio = r["pop_member_steps_s"] / r["seq_member_steps_s"]
        print(f"{threads:>7} {r['one_steps_s']:>14.1f} {r['full_run_s']:>13.1f} {r['pop_member_steps_s']:>22.1f} "
              f"{r['seq_member_steps_s']:>29.1f} {ratio:>6.2f}", flush=True)
        verdicts.append(
            f"threads={threads}: full-fidelity run < {RUN_TARGET_S:.0f} s: "
            f"{'MET' if r['full_run_s'] < RUN_TARGET_S else 'NOT MET'} ({r['full_run_s']:.1f} s, extrapolated from "
            f"{args.steps} steps); population ≥ {POPULATION_TARGET:.0f}× sequential: "
            f"{'MET' if ratio >= POPULATION_TARGET else 'NOT MET'} ({ratio:.2f}×)")
    print("\n".join(verdicts))

    print(f"\nStaleness memory at D = {args.delay} (MLP 784→100→10, B = 100)")
    print(f"{'seeds':>5} {'ParameterHistory (ring of D+1)':>31} {'RolloutQueue (D+1 rollouts)':>28} {'ratio':>8}")
    ring_one = ring_bytes(args.delay, 1)
    for population in (1, 10):
        # the S = 10 ring would hold over 3 GB: it is S × the S = 1 ring (measured), not allocated here
        ring = ring_one * population
        queue = queue_bytes(args.delay, population)
        note = "" if population == 1 else "  (ring: 10 × the S = 1 measurement)"
        print(f"{population:>5} {ring / 2**20:>27.1f} MiB {queue / 2**20:>24.2f} MiB {ring / queue:>7.0f}×{note}")

if __name__ == "__main__":
    main()
