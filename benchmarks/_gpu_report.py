"""The markdown report of ``benchmarks/gpu.py``: every table so far, from its state."""

from __future__ import annotations

MEMORY_TARGET, TIME_TARGET, SPEEDUP_TARGET = 0.25, 1.0, 100.0  # issue 35's targets on the GPU


def report(state: dict) -> str:
    sections = state["sections"]
    env = sections.get("env", {})
    lines = [f"# GPU run {state['started']}: {env.get('gpu', 'GPU unknown')}", "",
             f"Made by `benchmarks/gpu.py` in {len(state['calls'])} call(s) "
             f"({', '.join(c['at'] for c in state['calls'])}); each section's status below. "
             f"Memory {env.get('memory_gib')} GiB, CUDA {env.get('cuda')}, Python {env.get('python')}, "
             f"{env.get('cpus')} CPUs; versions: "
             + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()), ""]
    lines += ["| section | status | seconds | note |", "|---|---|---|---|"]
    for name in ("env", "kernels", "grpo", "population", "regime", "panel"):
        s = sections.get(name, {"status": "not run yet"})
        note = s.get("error") or s.get("why") or ""
        lines.append(f"| {name} | {s['status']} | {s.get('seconds', '')} | {note} |")
    lines += ["", *_kernels(sections.get("kernels", {})), "", *_grpo(sections.get("grpo", {})), "",
              *_population(sections.get("population", {})), "", *_regime(sections.get("regime", {})), "",
              *_panel(sections.get("panel", {}))]
    return "\n".join(lines) + "\n"


def _kernels(s: dict) -> list[str]:
    rows = s.get("rows", [])
    out = ["## (a) Log-probs under the LM head: forward + backward (grads of hidden and weight)", "",
           "Peak = torch.cuda.max_memory_allocated() − allocated before the call; time = median of 5 (CUDA events).",
           "", "| N | H | V | method | peak MiB | peak / plain | ms | time / plain |", "|---|---|---|---|---|---|---|---|"]
    plain = {tuple(r["size"]): r for r in rows if r["method"] == "naive" and "error" not in r}
    for r in rows:
        n, h, v = r["size"]
        if "error" in r:
            out.append(f"| {n} | {h} | {v} | {r['method']} | failed: {r['error']} | | | |")
            continue
        ref = plain.get(tuple(r["size"]))
        mem = r["peak"] / ref["peak"] if ref and ref["peak"] else float("nan")
        tim = r["time"] / ref["time"] if ref else float("nan")
        out.append(f"| {n} | {h} | {v} | {r['method']} | {r['peak'] / 2**20:.0f} | {mem:.3f} | {1e3 * r['time']:.2f} | "
                   f"{tim:.2f}× |")
        if r["method"] in ("torch", "triton") and v == 152064:
            ok = "met" if mem <= MEMORY_TARGET and tim <= TIME_TARGET else "NOT met"
            out[-1] += f" target (≤ {MEMORY_TARGET:.0%} memory, ≤ {TIME_TARGET:.1f}× time): {ok}"
    return out


def _grpo(s: dict) -> list[str]:
    out = [f"## (b) GRPO steps: {s.get('model', '')}", "",
           "PPO-clip loss with GRPO advantages, Adam, the whole model trained; sampling with the KV cache, learner "
           "log-probs through the fused kernel. Host syncs: CUDA's sync debug mode over one step.", "",
           "| dtype | steps/s | s/step | tokens/step | peak GiB | host syncs/step |", "|---|---|---|---|---|---|"]
    for r in s.get("runs", []):
        peak = f"{r['peak_gib']:.1f}" if r.get("peak_gib") is not None else "n/a"
        out.append(f"| {r['dtype']} | {r['steps_per_s']:.3f} | {r['seconds_per_step']:.2f} | {r['tokens_per_step']} | "
                   f"{peak} | {r['syncs_per_step'] if r['syncs_per_step'] is not None else 'n/a'} |")
    return out


def _population(s: dict) -> list[str]:
    out = ["## (c) The H = 10 reversal population: seed-steps per second", "",
           "reverse_copy (H = 10, V = 2, 10 prompts × 10 samples), DG, Adam; one step = rollout + update + history; "
           "CPU = one core of the same machine (torch.set_num_threads(1)).", "",
           "| device | population S | seed-steps/s | s/step | host syncs/step |", "|---|---|---|---|---|"]
    for r in s.get("rows", []):
        if "error" in r:
            out.append(f"| {r['device']} | {r['population']} | failed: {r['error']} | | |")
            continue
        syncs = r["syncs_per_step"] if r["syncs_per_step"] is not None else "n/a"
        out.append(f"| {r['device']} | {r['population']} | {r['seed_steps_per_s']:.1f} | {r['seconds_per_step']:.4f} | "
                   f"{syncs} |")
    if s.get("speedup"):
        ok = "met" if s["speedup"] >= SPEEDUP_TARGET else "NOT met"
        out += ["", f"Best GPU / one CPU core: **{s['speedup']:.0f}×** (target ≥ {SPEEDUP_TARGET:.0f}×: {ok})."]
    return out


def _regime(s: dict) -> list[str]:
    out = ["## (e) The matched regime's long-answer controls (8 seeds each; rows: gpu-regime.parquet)", "",
           "| T | arm | RL steps | seconds | starting pass rate | final error |", "|---|---|---|---|---|---|"]
    for r in s.get("rows", []):
        out.append(f"| {r['T']} | {r['arm']} | {r['steps']} | {r['seconds']} | {r['start_pass_rate']:.3f} | "
                   f"{r['end_error']:.3f} |")
    return out


def _panel(s: dict) -> list[str]:
    out = ["## (d) The pretrained llm-staleness panel at full fidelity (device='cuda')", ""]
    if "jobs" in s:
        out.append(f"{s['jobs_done']} of {s['jobs']} jobs done"
                   + (f", {s['seconds_per_job']:.1f} s per job this call" if s.get("seconds_per_job") else "")
                   + ". Rows: gpu-panel.parquet; `python benchmarks/gpu.py --import-panel gpu-panel.parquet` puts them "
                     "in the results store for `SANDBOX_DEVICE=cuda` notebooks.")
    return out
