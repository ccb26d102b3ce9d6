"""CPU seconds per learner step per seed of the matched regime, against today's transformer task on
the same work (issue 42, item 8; target ≤ 0.25 CPU-s per step per seed at T = 64, 16 prompts × 8).

Both run the library's own loop (``ActorLearner.rollout`` + ``update`` + ``publish``) on one thread,
as a population of ``--seeds`` seeds, each configuration in a fresh subprocess, after a warm-up:

* ``regime``: the ``regime`` task at T answer tokens (V = 1,024, prompt 2N + 2 tokens), its
  recipe (AdamW, clip), REINFORCE; from a random initialisation (``sft_steps=0``), so answers run
  to T (the most work a step can take: a warm-started policy stops at EOS earlier);
* ``baseline``: ``reverse_copy`` with the same vocabulary, T answer tokens (``think`` free tokens
  before a 10-token reversal) and batch — today's transformer sequence task on the same work.

    python benchmarks/regime.py                 # T = 64, 8 seeds
    python benchmarks/regime.py --T 16 64       # several lengths

Beside the time, each row counts a step's FLOPs (``torch.utils.flop_counter``: matmuls and
attention) and divides them by this core's best batched-matmul rate on the step's dominant shape: a
floor no implementation of the same model and batch goes below on this core (elementwise work,
softmax and sampling come on top).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

TARGET = 0.25  # CPU-s per step per seed at T = 64


def measure(kind: str, T: int, seeds: int, steps: int, warmup: int) -> dict:
    import torch

    import sandbox.tasks.regime  # noqa: F401  (registers the task where the entry point is not installed)
    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner
    from sandbox.tasks.regime import RECIPE

    torch.set_num_threads(1)
    batch = {"population": seeds, "prompts_per_step": 16, "samples_per_prompt": 8}
    if kind == "regime":
        config = RunConfig(task="regime", task_kwargs={**batch, "answer_len": T, "sft_steps": 0}, **RECIPE,
                           estimator="reinforce", lr=3e-5, steps=warmup + steps, log_points=2)
    else:
        config = RunConfig(task="reverse_copy", task_kwargs={**batch, "H": 10, "V": 1024, "problem_V": 2,
                                                              "think": T - 10},
                           estimator="reinforce", lr=3e-5, steps=warmup + steps, log_points=2)
    learner = ActorLearner(config)
    cpu = []
    for step in range(warmup + steps):
        t0 = time.process_time()
        rollout = learner.rollout(step)
        learner.update(step, rollout)
        learner.publish(step + 1)
        if step >= warmup:
            cpu.append(time.process_time() - t0)
    cpu.sort()
    median = cpu[len(cpu) // 2]
    flop = step_flop(learner, warmup + steps)
    return {"kind": kind, "T": T, "seeds": seeds, "cpu_s_per_step": median, "cpu_s_per_seed_step": median / seeds,
            "tokens": int(rollout.mask.sum()), "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "gflop_per_step": flop / 1e9, "matmul_gflops": matmul_rate()}


def step_flop(learner, step: int) -> float:
    """The FLOPs of one more step (matmuls and attention, ``torch.utils.flop_counter``)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        rollout = learner.rollout(step)
        learner.update(step, rollout)
    return float(counter.get_total_flops())


def matmul_rate(repeats: int = 15) -> float:
    """This core's best batched-matmul rate, GFLOP/s, on the shapes that dominate a step (the
    population's unembedding: [8, 8192, 64] @ [8, 64, 1024]; fastest of ``repeats``)."""
    import torch

    a, b = torch.randn(8, 8192, 64), torch.randn(8, 64, 1024)
    torch.bmm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        torch.bmm(a, b)
        best = min(best, time.process_time() - t0)
    return 2 * 8 * 8192 * 64 * 1024 / best / 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, nargs="+", default=[64])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per configuration (median reported)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), args.seeds, args.steps, args.warmup)))
        return
    rows = []
    for T in args.T:
        for kind in ("regime", "baseline"):
            out = subprocess.run([sys.executable, __file__, "--child", kind, str(T), "--seeds", str(args.seeds),
                                  "--steps", str(args.steps), "--warmup", str(args.warmup)],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"| T | task | CPU-s / step ({args.seeds} seeds) | CPU-s / step / seed | valid tokens / step | ratio to baseline "
          "| GFLOP / step | floor: GFLOP at the best matmul rate, CPU-s / step / seed |")
    print("|---|---|---|---|---|---|---|---|")
    rate = max(r["matmul_gflops"] for r in rows)  # the best any child saw: contention only slows it
    for T in args.T:
        base = next(r for r in rows if r["T"] == T and r["kind"] == "baseline")
        for r in (r for r in rows if r["T"] == T):
            ratio = r["cpu_s_per_seed_step"] / base["cpu_s_per_seed_step"]
            floor = r["gflop_per_step"] / rate / r["seeds"]
            print(f"| {T} | {r['kind']} | {r['cpu_s_per_step']:.2f} | {r['cpu_s_per_seed_step']:.3f} | {r['tokens']} | "
                  f"{ratio:.2f}× | {r['gflop_per_step']:.1f} | {floor:.3f} (at {rate:.0f} GFLOP/s) |")
    at64 = next((r for r in rows if r["T"] == 64 and r["kind"] == "regime"), None)
    if at64:
        verdict = "met" if at64["cpu_s_per_seed_step"] <= TARGET else "NOT met"
        print(f"\ntarget ≤ {TARGET} CPU-s per step per seed at T = 64: {at64['cpu_s_per_seed_step']:.3f} — {verdict}; "
              f"its FLOPs at this core's best matmul rate: {at64['gflop_per_step'] / rate / at64['seeds']:.3f}")


if __name__ == "__main__":
    main()
