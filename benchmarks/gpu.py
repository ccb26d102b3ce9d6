"""The GPU run, prepared to the minute: one script for a GPU's few minutes (issue 35).

A GPU comes by chance, for 15 minutes of device time in all, at most 10 a command. This script runs
first, finishes within ``--budget`` seconds (default 530: a 600 s command with room to write), writes
everything under ``--out`` (``$OUT`` there), and resumes where an earlier call stopped: it reads the
state an earlier call wrote (``--state``, ``--panel``: the files brought back and copied into the
repository, which the next call carries) and skips what is done. Sections, in order:

  env         the GPU, the library versions
  kernels     (a) fused log-prob (torch and Triton backends) vs the plain path vs Liger's fused linear
              cross-entropy (and torch's, if present): N ∈ {4096, 16384}, H = 4096, V ∈ {32000, 152064},
              bf16, time and peak memory (benchmarks/kernels.py's measurement)
  grpo        (b) SmolLM2-135M GRPO steps per second and peak memory (its architecture and tokenizer;
              random weights: the speed does not depend on them), host syncs per step
  population  (c) seed-steps per second of the H = 10 reversal population on the GPU against one CPU
              core of the same machine, in the same run; host syncs per step
  regime      (e) the matched regime's long-answer controls at T = 256 and 1,024, 8 seeds each, their
              per-seed trajectories (benchmarks/_gpu_regime.py)
  panel       (d) the pretrained llm-staleness panel at full fidelity (device='cuda'), job by job,
              seed-major, as far as the time goes (needs the model file: see --prepare)

Host synchronisations are counted with ``torch.cuda.set_sync_debug_mode('warn')`` over one step.
Each section's failure is recorded and the next one runs. The report, ``gpu-<date>.md``, names the
GPU and holds every table so far.

Here (a CPU machine with PyPI):   python benchmarks/gpu.py --prepare      # prints the device calls
There (the device tool's `run`):  see --prepare's output and docs/scale-out.md, "The GPU run"
Afterwards, here:                 python benchmarks/gpu.py --import-panel FILES_AT/gpu-panel.parquet
Rehearsal on a CPU (CI):          python benchmarks/gpu.py --rehearse --out /tmp/gpu-out
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(ROOT))  # the sandbox source, installed or not (the device has no install)
RESULTS = ROOT / "benchmarks" / "results"
GPU_DIR = ROOT / ".gpu"  # what --prepare writes and the device calls carry (git-ignored)
MODELS = Path("/tmp/sandbox-models")  # where the device converts the carried model file
log = logging.getLogger("gpu")


# ----------------------------------------------------------------------------- the run
class Run:
    """The deadline, the state (read from an earlier call, written after every piece) and the output files."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.out = args, Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + args.budget
        # an earlier call's state: this machine's own copy (a warm machine keeps /tmp between calls), else
        # the one brought back and carried in the tree
        self.local = Path(args.local_state)
        previous = self.local if self.local.is_file() else Path(args.state)
        self.state = json.loads(previous.read_text()) if previous.is_file() else {}
        self.state.setdefault("sections", {})
        self.state.setdefault("started", datetime.date.today().isoformat())
        self.state.setdefault("calls", []).append({"at": datetime.datetime.now().isoformat(timespec="seconds"),
                                                   "budget_s": args.budget, "rehearse": args.rehearse})

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        """State and report, rewritten whole after every piece (a command killed at its limit keeps them)."""
        text = json.dumps(self.state, indent=1, default=str)
        (self.out / "gpu-state.json").write_text(text)
        self.local.parent.mkdir(parents=True, exist_ok=True)
        self.local.write_text(text)
        from _gpu_report import report  # beside this file

        name = f"gpu-{self.state['started']}.md" if not self.args.rehearse else "gpu-rehearsal.md"
        (self.out / name).write_text(report(self.state))


def section(run: Run, name: str, fn, need_s: float) -> None:
    done = run.state["sections"].get(name, {})
    if done.get("status") == "done":
        log.info("%s: done in an earlier call", name)
        return
    if run.left() < need_s:
        run.state["sections"][name] = {"status": "not run", "why": f"{run.left():.0f} s left, needs ~{need_s:.0f} s"}
        run.save()
        return
    start = time.monotonic()
    log.info("%s: start (%.0f s left)", name, run.left())
    try:
        result = fn(run)
        run.state["sections"][name] = {"status": "done", "seconds": round(time.monotonic() - start, 1), **result}
    except Exception as err:  # recorded: the next section still runs
        log.exception("%s failed", name)
        kept = run.state["sections"].get(name, {})  # what a section saved so far (rows, jobs done) stays
        run.state["sections"][name] = {**kept, "status": "error", "seconds": round(time.monotonic() - start, 1),
                                       "error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()[-3000:]}
    run.save()


def count_syncs(fn) -> int | None:
    """Host synchronisations during ``fn()`` (CUDA's sync debug mode; None without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        fn()
        return None
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def measure_steps(learner, device, warmup: int, steps: int) -> tuple[float, int | None]:
    """Seconds of ``steps`` learner steps (rollout, update, history) after ``warmup`` (kernels compiled,
    the allocator grown; peak memory counted from there), and the host syncs of one more step."""
    import torch

    def one(step: int) -> None:
        learner.update(step, learner.rollout(step))
        learner.after_update(step + 1)

    for step in range(warmup):
        one(step)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds = sum(timed(lambda s=s: one(s), device) for s in range(warmup, warmup + steps))
    syncs = count_syncs(lambda: one(warmup + steps)) if device.type == "cuda" else None
    return seconds, syncs


def timed(fn, device) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


# ----------------------------------------------------------------------------- sections
#: seconds after which a section starts no new measurement (the rest waits for the next call)
SHARE = {"kernels": 150, "grpo": 90, "population": 60}


def env(run: Run) -> dict:
    import importlib.metadata as md

    import torch

    cuda = torch.cuda.is_available()
    versions = {}
    for name in ("torch", "triton", "transformers", "liger-kernel", "gguf", "accelerate", "numpy"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return {"gpu": torch.cuda.get_device_name() if cuda else "none (CPU rehearsal)",
            "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
            "cuda": torch.version.cuda, "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "versions": versions}


def kernels(run: Run) -> dict:
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("bench_kernels", ROOT / "benchmarks" / "kernels.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cuda = torch.cuda.is_available()
    sizes = bench.CUDA_SIZES if not run.args.rehearse else [(64, 32, 500)]
    methods = ["naive", "torch"] + (["triton"] if cuda else [])
    methods += ["liger"] if cuda and importlib.util.find_spec("liger_kernel") else []
    methods += ["torch_lce"] if hasattr(torch.nn.functional, "linear_cross_entropy") else []
    rows = run.state["sections"].get("kernels", {}).get("rows", [])
    measured = {(tuple(r["size"]), r["method"]) for r in rows}
    stop = time.monotonic() + SHARE["kernels"]  # the later sections' time is theirs
    for size in sizes:
        for method in methods:
            if (tuple(size), method) in measured or run.left() < 20 or time.monotonic() > stop:
                continue
            case = {"size": list(size), "method": method, "dtype": "bfloat16" if cuda else "float32", "chunk": 1024,
                    "repeats": 5, "device": "cuda" if cuda else "cpu", "threads": None}
            try:
                rows.append({**case, **bench._measure(case)})
            except Exception as err:  # an OOM at the largest size is a result too
                rows.append({**case, "error": f"{type(err).__name__}: {str(err)[:200]}"})
            if cuda:
                torch.cuda.empty_cache()
            run.state["sections"]["kernels"] = {"status": "running", "rows": rows}
            run.save()
    missing = [(s, m) for s in sizes for m in methods if (tuple(s), m) not in {(tuple(r["size"]), r["method"]) for r in rows}]
    if missing:
        raise RuntimeError(f"time ran out with {len(missing)} measurement(s) to go (kept; the next call finishes them)")
    return {"rows": rows, "methods": methods,
            "skipped": {m: "not importable" for m in ("liger",) if m not in methods and cuda}}


def grpo(run: Run) -> dict:
    import torch

    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if run.args.rehearse:
        task = {"env": "reverse", "env_kwargs": {"length": 3}, "prompts_per_step": 2, "samples_per_prompt": 2,
                "eval_prompts": 2, "hidden": 16, "layers": 1}
        steps, what = 2, "a tiny random Qwen2 (rehearsal)"
    else:
        from _gpu_prepare import random_smollm2

        task = {"path": str(random_smollm2(GPU_DIR)), "tokenizer": "checkpoint", "chat": True, "env": "arithmetic",
                "env_kwargs": {"digits": 1, "extract": "last"}, "max_new_tokens": 128, "temperature": 0.7,
                "prompts_per_step": 16, "samples_per_prompt": 8, "eval_prompts": 16}
        steps, what = 5, "SmolLM2-135M architecture and tokenizer, random weights, 16 prompts × 8 samples, ≤ 128 tokens"
    out = {"model": what, "runs": []}
    stop = time.monotonic() + SHARE["grpo"]
    for dtype in ("float32", "bfloat16"):
        if (run.left() < 60 or time.monotonic() > stop) and out["runs"]:
            break
        config = RunConfig(task="hf_text", task_kwargs={**task, "dtype": dtype}, estimator="ppo", advantage="grpo",
                           lr=1e-6, steps=steps + 2, device=device.type)
        learner = ActorLearner(config)
        seconds, syncs = measure_steps(learner, device, warmup=2, steps=steps)
        out["runs"].append({"dtype": dtype, "steps_per_s": steps / seconds, "seconds_per_step": seconds / steps,
                            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
                            "syncs_per_step": syncs, "tokens_per_step": learner.task.batch_size * learner.task.new_tokens})
        del learner
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return out


def population(run: Run) -> dict:
    import torch

    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner

    cuda = torch.cuda.is_available()
    sizes = [("cpu", 8)] + ([("cuda", s) for s in (1024, 4096, 16384)] if cuda else [])
    if run.args.rehearse:
        sizes = [("cpu", 2)]
    rows = []
    stop = time.monotonic() + SHARE["population"]
    for device, S in sizes:
        if (run.left() < 45 or time.monotonic() > stop) and rows:
            break
        threads = torch.get_num_threads()
        if device == "cpu":
            torch.set_num_threads(1)  # one core of this machine
        try:
            task = {"population": S, **({"eval_prompts": 2, "eval_samples": 2} if run.args.rehearse else {})}
            learner = ActorLearner(RunConfig(task="reverse_copy", task_kwargs=task, estimator="dg", steps=100,
                                             device=device))
            steps = 2 if run.args.rehearse else 20
            seconds, syncs = measure_steps(learner, torch.device(device), warmup=1, steps=steps)
            rows.append({"device": device, "population": S, "seed_steps_per_s": S * steps / seconds,
                         "seconds_per_step": seconds / steps, "syncs_per_step": syncs})
        except Exception as err:
            rows.append({"device": device, "population": S, "error": f"{type(err).__name__}: {str(err)[:200]}"})
        finally:
            torch.set_num_threads(threads)
            if cuda:
                torch.cuda.empty_cache()
    cpu = next((r["seed_steps_per_s"] for r in rows if r["device"] == "cpu" and "error" not in r), None)
    best = max((r.get("seed_steps_per_s", 0) for r in rows if r["device"] == "cuda"), default=None)
    return {"rows": rows, "speedup": best / cpu if cpu and best else None}


def panel(run: Run) -> dict:
    import pandas as pd
    import torch

    from sandbox.jobs.sweep import Job
    from sandbox.runtime.config import RunConfig

    if run.args.rehearse:
        jobs = [Job.training(RunConfig(task="hf_text", task_kwargs={"env": "reverse", "env_kwargs": {"length": 2},
                                                                     "prompts_per_step": 2, "samples_per_prompt": 2,
                                                                     "eval_prompts": 2, "hidden": 16, "layers": 1},
                                       estimator=m, steps=2, log_points=1, seed=seed,
                                       staleness={"kind": "fixed", "D": s} if s else {}, label=f"{m} | s={s}"))
                for seed in range(2) for s in (0, 1) for m in ("reinforce", "dg")]
    else:
        from _gpu_prepare import model_on_device

        if not model_on_device(GPU_DIR, MODELS):
            raise RuntimeError("the SmolLM2 file is not on this machine (carry every .gpu/model-N part: --prepare)")
        from simulations.llm import pretrained_jobs

        jobs = pretrained_jobs("full", device="cuda" if torch.cuda.is_available() else "cpu")
    local = run.local.with_name("gpu-panel.parquet")
    path = local if local.is_file() else Path(run.args.panel)
    frames = [pd.read_parquet(path)] if path.is_file() else []
    done = set(frames[0].job_id.unique()) if frames else set()
    per_job = []
    for job in jobs:
        if job.id in done:
            continue
        if run.left() < 1.3 * max(per_job, default=60 if not run.args.rehearse else 1):
            break
        start, cpu = time.monotonic(), time.process_time()
        frame = job.run()
        frame["cpu_s"], frame["wall_s"] = time.process_time() - cpu, time.monotonic() - start
        frames.append(frame)
        done.add(job.id)
        per_job.append(time.monotonic() - start)
        pd.concat(frames, ignore_index=True).to_parquet(run.out / "gpu-panel.parquet")
        shutil.copy(run.out / "gpu-panel.parquet", local)
        run.state["sections"]["panel"] = {"status": "running", "jobs_done": len(done), "jobs": len(jobs)}
        run.save()
    status = {"jobs_done": len(done), "jobs": len(jobs), "seconds_per_job": sum(per_job) / len(per_job) if per_job else None}
    if len(done) < len(jobs):
        raise RuntimeError(f"{len(done)} of {len(jobs)} jobs done; the next call goes on (carry gpu-panel.parquet)")
    return status


def regime(run: Run) -> dict:
    from _gpu_regime import regime as run_regime  # beside this file

    return run_regime(run)


#: name → (function, seconds it needs at least to start)
SECTIONS = {"env": (env, 0), "kernels": (kernels, 60), "grpo": (grpo, 90), "population": (population, 60),
            "regime": (regime, 90), "panel": (panel, 90)}


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-out"), help="where every file goes ($OUT)")
    parser.add_argument("--budget", type=float, default=530.0, help="seconds this call may take")
    parser.add_argument("--state", default=str(RESULTS / "gpu-state.json"), help="an earlier call's state (if any)")
    parser.add_argument("--panel", default=str(RESULTS / "gpu-panel.parquet"), help="an earlier call's panel rows")
    parser.add_argument("--local-state", default="/tmp/sandbox-gpu/gpu-state.json",
                        help="this machine's own copy of the state (read first: a warm machine keeps it)")
    parser.add_argument("--rehearse", action="store_true", help="toy sizes on whatever device is here (CI)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset, in the order run")
    parser.add_argument("--prepare", action="store_true", help="here: wheels, model parts and the device calls")
    parser.add_argument("--import-panel", metavar="PARQUET", help="here: the panel's rows into --results")
    parser.add_argument("--results", default=os.environ.get("SANDBOX_RESULTS", "results"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sections.split(",")) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; sections: {list(SECTIONS)}")
    if args.prepare:
        from _gpu_prepare import prepare

        return prepare(GPU_DIR)
    if args.import_panel:
        from _gpu_prepare import import_panel

        return import_panel(args.import_panel, args.results)
    if args.rehearse:
        os.environ.setdefault("SANDBOX_MODELS", str(Path(args.out) / "models"))
    import torch

    if not (args.rehearse or torch.cuda.is_available()):
        print("benchmarks/gpu.py: torch.cuda.is_available() is False here; this is the GPU run (docs/scale-out.md, "
              "'The GPU run'); --rehearse runs it at toy sizes on this machine", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    run = Run(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(), logging.FileHandler(run.out / "gpu-log.txt", mode="a")])
    for name in args.sections.split(","):
        fn, need = SECTIONS[name]
        section(run, name, fn, need if not args.rehearse else 0)
    log.info("done: %s", {k: v.get("status") for k, v in run.state["sections"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
