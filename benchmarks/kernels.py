"""Peak memory and time of forward+backward for per-token log-probs under an LM head.

Methods: ``naive`` (log_softmax of all [N, V] logits), ``torch`` and ``triton`` (the two backends of
``sandbox.kernels.fused_logprob``), ``liger`` (Liger-Kernel's fused linear cross-entropy, when
importable) and ``torch_lce`` (PyTorch's chunked ``F.linear_cross_entropy``, when present).
Every method gets the gradient of hidden and of the LM-head weight; the ratios are to ``naive``
measured in the same run.

    python benchmarks/kernels.py                       # CPU grid (about 2 minutes on 2 cores)
    python benchmarks/kernels.py --device cuda         # N ∈ {4096, 16384}, H = 4096, V ∈ {32000, 152064}, bf16
    python benchmarks/kernels.py --sizes 1024,512,32000 --methods naive,torch

CUDA: peak = torch.cuda.max_memory_allocated() − memory allocated before the call; time = CUDA events.
CPU: each (size, method) runs in a fresh subprocess (glibc told to mmap every allocation ≥ 64 KiB,
so freed tensors leave the resident set); after a warm-up call on 8 rows, peak = ru_maxrss after
the first full call − resident set before it; time = wall clock, fastest of the following calls.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CUDA_SIZES = [(n, 4096, v) for n in (4096, 16384) for v in (32000, 152064)]
CPU_SIZES = [(n, 256, v) for n in (512, 2048) for v in (8000, 32000)]
CPU_INTERPRETER_SIZE = (256, 64, 4000)  # the only size at which the Triton interpreter is run
ALL_METHODS = ("naive", "torch", "triton", "liger", "torch_lce")
MEMORY_TARGET, TIME_TARGET = 0.25, 1.0


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    if args.worker:
        print(json.dumps(_measure(json.loads(args.worker))))
        return
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    cuda = args.device == "cuda"
    dtype = args.dtype or ("bfloat16" if cuda else "float32")
    chunk = args.chunk_size or (1024 if cuda else 256)
    sizes = args.sizes or (CUDA_SIZES if cuda else CPU_SIZES)
    methods = args.methods or ["naive", "torch", "triton", "liger", "torch_lce" if cuda else ""]
    methods = [m for m in methods if m]
    notes = _availability_notes(methods, cuda)

    print(
        f"# fused_logprob benchmark — device={args.device}"
        f" ({torch.cuda.get_device_name() if cuda else f'{torch.get_num_threads()} CPU threads'}),"
        f" dtype={dtype}, chunk_size={chunk}, torch {torch.__version__}"
    )
    print(
        "# forward + backward (grads of hidden and weight); upstream gradient: random on logp "
        "(liger: d(sum CE))"
    )
    if cuda:
        print(
            "# peak = torch.cuda.max_memory_allocated() − allocated before the call (inputs "
            "excluded); time = CUDA events, median"
        )
    else:
        print(
            "# peak = ru_maxrss − RSS before the call (after an 8-row warm-up), fresh subprocess "
            "per row, MALLOC_MMAP_THRESHOLD_=65536; time = wall clock, best of the timed calls; CPU "
            "measurement"
        )
    for method, note in notes.items():
        print(f"# {method}: {note}")

    rows = []
    runnable = [m for m in methods if m not in notes]
    for size in sizes:
        rows += _measure_size(size, runnable, dtype, chunk, args, cuda)
    if not cuda and "triton" in methods and "triton" not in notes:
        print(
            f"# triton: on CPU only the interpreter runs it (TRITON_INTERPRET=1), far too slow to "
            f"time meaningfully; it is measured at N,H,V = {CPU_INTERPRETER_SIZE} only "
            f"(chunk_size=64), labelled 'interpreter'."
        )
        rows += _measure_size(
            CPU_INTERPRETER_SIZE, ["naive", "torch", "triton"], dtype, 64, args, cuda
        )
    _print_table(rows)
    _print_targets(rows, cuda)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=_size,
        metavar="N,H,V",
        help="configurations (default: the device's grid)",
    )
    parser.add_argument(
        "--methods",
        type=lambda s: s.split(","),
        metavar="A,B",
        help=f"subset of {','.join(ALL_METHODS)}",
    )
    parser.add_argument("--dtype", choices=("float32", "bfloat16"))
    parser.add_argument("--chunk-size", type=int, help="default 1024 on cuda, 256 on cpu")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="timed calls after the measured one (CPU: fewer once 6 s are spent)",
    )
    parser.add_argument("--threads", type=int, help="CPU: torch.set_num_threads in every run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for m in args.methods or ():
        if m not in ALL_METHODS:
            parser.error(f"unknown method {m!r}; choose from {ALL_METHODS}")
    return args


def _size(text: str) -> tuple[int, int, int]:
    try:
        n, h, v = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N,H,V (three integers), got {text!r}") from None
    return n, h, v


def _availability_notes(methods, cuda) -> dict[str, str]:
    notes = {}
    if "triton" in methods and importlib.util.find_spec("triton") is None:
        notes["triton"] = "skipped: triton is not importable"
    if "liger" in methods and importlib.util.find_spec("liger_kernel") is None:
        notes["liger"] = "skipped: liger_kernel is not importable (pip install liger-kernel)"
    elif "liger" in methods and not cuda:
        notes["liger"] = "skipped: Liger-Kernel's Triton kernels need CUDA"
    if "torch_lce" in methods:
        import torch.nn.functional as F

        if not hasattr(F, "linear_cross_entropy"):
            notes["torch_lce"] = "skipped: this torch has no F.linear_cross_entropy"
    return notes


def _measure_size(size, methods, dtype, chunk, args, cuda):
    rows = []
    for method in methods:
        if method == "triton" and not cuda and size != CPU_INTERPRETER_SIZE:
            continue
        spec = {
            "size": size,
            "method": method,
            "dtype": dtype,
            "chunk": chunk,
            "repeats": args.repeats,
            "device": args.device,
            "threads": args.threads,
        }
        result = _measure(spec) if cuda else _in_subprocess(spec)
        rows.append({**spec, **result})
    return rows


def _in_subprocess(spec):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    if spec["method"] == "triton":
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _measure(spec) -> dict:
    """Run one (size, method): peak extra bytes of the first call, median seconds of the rest."""
    import torch

    n, h, v = spec["size"]
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    device = torch.device(spec["device"])
    dtype = getattr(torch, spec["dtype"])
    gen = torch.Generator(device=device).manual_seed(0)
    hidden = torch.randn(n, h, device=device, dtype=dtype, generator=gen).requires_grad_()
    weight = (
        torch.randn(v, h, device=device, dtype=dtype, generator=gen).mul_(h**-0.5).requires_grad_()
    )
    targets = torch.randint(0, v, (n,), device=device, generator=gen)
    upstream = torch.randn(n, device=device, generator=gen)
    step = _step(spec["method"], hidden, weight, targets, upstream, spec["chunk"])

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        times = []
        for _ in range(spec["repeats"]):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        # a small call first, so one-time costs (code pages, thread pools, oneDNN/MKL set-up) are
        # in the baseline rather than in the peak
        warm = min(n, 8)
        _step(
            spec["method"], hidden[:warm], weight, targets[:warm], upstream[:warm], spec["chunk"]
        )()
        base = _rss_bytes()
        step()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
        times, budget = [], time.perf_counter() + 6.0
        for i in range(spec["repeats"]):
            if i and time.perf_counter() > budget:  # keep the CPU run short at large sizes
                break
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    # CPU: the fastest call, the least disturbed by other processes; CUDA: the median
    best = min(times) if device.type == "cpu" else statistics.median(times)
    return {"peak": max(peak, 0), "time": best, "calls": len(times)}


def _step(method, hidden, weight, targets, upstream, chunk):
    """A closure doing forward + backward (grads of hidden and weight, then dropped)."""
    import torch

    from sandbox.kernels import fused_logprob, naive_logprob

    if method == "naive":

        def forward():
            return naive_logprob(hidden, weight, targets)
    elif method in ("torch", "triton"):

        def forward():
            return fused_logprob(hidden, weight, targets, chunk_size=chunk, backend=method)
    elif method == "liger":
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

        liger = LigerFusedLinearCrossEntropyLoss(reduction="sum")

        def step_liger():
            loss = liger(weight, hidden, targets)
            loss = loss[0] if isinstance(loss, tuple) else loss
            torch.autograd.grad(loss, (hidden, weight))

        return step_liger
    elif method == "torch_lce":
        import torch.nn.functional as F

        def forward():
            return -F.linear_cross_entropy(
                hidden,
                weight,
                targets,
                reduction="none",
                options=torch.nn.LinearCrossEntropyOptions(),
            )
    else:
        raise ValueError(f"unknown method {method!r}")

    def step():
        logp = forward()
        torch.autograd.grad(logp, (hidden, weight), grad_outputs=upstream.to(logp.dtype))

    return step


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _print_table(rows):
    naive = {tuple(r["size"]): r for r in rows if r["method"] == "naive" and "error" not in r}
    header = f"{'N':>6} {'H':>5} {'V':>7}  {'method':<22} {'peak MiB':>9} {'mem/naive':>9} {'time ms':>9} {'time/naive':>10}"
    print(header)
    print("-" * len(header))
    for r in rows:
        n, h, v = r["size"]
        label = r["method"] + (
            " (interpreter)" if r["method"] == "triton" and r["device"] == "cpu" else ""
        )
        if "error" in r:
            print(f"{n:>6} {h:>5} {v:>7}  {label:<22} failed: {r['error']}")
            continue
        ref = naive.get(tuple(r["size"]))
        r["mem_ratio"] = r["peak"] / ref["peak"] if ref and ref["peak"] else float("nan")
        r["time_ratio"] = r["time"] / ref["time"] if ref else float("nan")
        print(
            f"{n:>6} {h:>5} {v:>7}  {label:<22} {r['peak'] / 2**20:>9.1f} {r['mem_ratio']:>9.3f}"
            f" {r['time'] * 1e3:>9.1f} {r['time_ratio']:>9.2f}x"
        )


def _print_targets(rows, cuda):
    measured = [
        r
        for r in rows
        if "mem_ratio" in r
        and r["method"] != "naive"
        and not (r["method"] == "triton" and not cuda)
    ]
    if not measured:
        return
    largest_v = max(r["size"][2] for r in measured)
    where = "GPU" if cuda else "CPU measurement; the time target is a GPU target"
    print(
        f"\nTargets (issue): peak memory <= {MEMORY_TARGET:.0%} of naive at the largest V "
        f"(V={largest_v}); time <= {TIME_TARGET:.1f}x naive ({where})"
    )
    for r in measured:
        if r["size"][2] != largest_v:
            continue
        n, h, v = r["size"]
        mem_ok = "met" if r["mem_ratio"] <= MEMORY_TARGET else "NOT met"
        time_ok = "met" if r["time_ratio"] <= TIME_TARGET else "NOT met"
        print(
            f"  {r['method']:<10} N={n:<6} memory {r['mem_ratio']:.3f} of naive: {mem_ok:<8}"
            f" time {r['time_ratio']:.2f}x naive: {time_ok}"
        )


if __name__ == "__main__":
    main()
