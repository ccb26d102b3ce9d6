"""Calibration of the measured-mismatch friction against the published measurements (issue 32).

The friction's statistics are measured where the published ones were: tokens drawn from the
sampler μ and scored by the learner π, here (1) a uniform policy over V tokens — a freshly
initialised model, "the start of training" — answering T tokens, and (2) the initial policy of each
case scale (``task_rows``, the case file's scales). Statistics, per precision:

* token KL[μ‖π]: k1 = mean over tokens of log μ − log π (and k3), sandbox.estimators.base.behavior_diagnostics;
* the fraction of tokens whose ratio π/μ lies outside [0.9, 1.1];
* the mean |log π − log μ|;
* the drift of the sequence log-ratio Σ_t (log π − log μ): its mean per 1,000 tokens, and its
  standard deviation over sequences.

``python -m simulations.cases.calibration`` prints the table of docs/predictions.md (Calibration);
``tests/test_calibration.py`` checks it is this code's output and that it meets the published levels.
"""

from __future__ import annotations

import math

import torch

from sandbox.estimators.base import behavior_diagnostics
from sandbox.frictions import FrictionContext
from sandbox.frictions.measured import PUBLISHED, MeasuredMismatch

#: the published figures the table is set beside (sources in sandbox.frictions.measured and the docs)
PUBLISHED_ROWS = {
    "bf16": {"token_kl": "≈ 1e-3 (Precision-RL Fig. 3, OAT, start; read off)",
             "drift": "−1.01 (Precision-RL Fig. 5, printed)",
             "outside": "a few % (issue 32's figure; no source found: unverified)"},
    "fp16": {"token_kl": "≈ 1e-5 (Precision-RL Fig. 3, OAT, start; read off)",
             "drift": "−0.07 (Precision-RL Fig. 5, printed)",
             "outside": "unknown"},
}
BAND = (0.9, 1.1)


def token_statistics(logp: torch.Tensor, behavior_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """The table's statistics of tokens drawn from μ (``behavior_logp``) and scored by π (``logp``),
    ``[*P, B, T]``, pooled over every member and row."""
    d = behavior_diagnostics(logp, behavior_logp, mask)
    log_r = torch.where(mask, logp - behavior_logp, torch.zeros_like(logp))
    ratio = log_r.exp()
    outside = ((ratio < BAND[0]) | (ratio > BAND[1])) & mask
    seq = log_r.sum(-1)  # [*P, B]
    tokens = mask.sum(-1).to(seq.dtype)
    return {
        "token_kl_k1": float(d["kl_k1"].mean()),
        "token_kl_k3": float(d["kl_k3"].mean()),
        "outside_band": float(outside.sum() / mask.sum()),
        "abs_log_ratio": float(d["log_ratio_abs_mean"].mean()),
        "drift_per_1k": float((seq.sum() / tokens.sum()) * 1000),
        "seq_sd": float(seq.std()),
    }


def uniform_rows(token_kl: float, vocab: int, length: int, rows: int = 400, seed: int = 0,
                 chunk: int = 8) -> dict[str, float]:
    """Statistics of the friction at ``token_kl`` for a uniform policy over ``vocab`` tokens answering
    ``length`` tokens: ``rows`` sequences drawn from μ, ``chunk`` at a time (float64, seeded)."""
    gen = torch.Generator().manual_seed(seed)
    f = MeasuredMismatch(token_kl=token_kl)
    ctx = FrictionContext(n_actions=vocab)
    behavior = []
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        log_mu = torch.log_softmax(f.actor_logits(torch.zeros(n, length, vocab, dtype=torch.float64), ctx, gen), -1)
        a = torch.multinomial(log_mu.exp().reshape(-1, vocab), 1, generator=gen).reshape(n, length, 1)
        behavior.append(log_mu.gather(-1, a).squeeze(-1))
    behavior = torch.cat(behavior)
    logp = torch.full_like(behavior, -math.log(vocab))
    return token_statistics(logp, behavior, torch.ones_like(behavior, dtype=torch.bool))


#: the uniform-policy rows of the table: (precision, V, T)
UNIFORM_GRID = [(p, v, t) for p in ("bf16", "fp16") for v in (2, 1024) for t in (256, 1024)]


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def uniform_table() -> str:
    """The uniform-policy part of the calibration table (markdown)."""
    lines = ["| precision (κ) | V | T | token KL k1 | k3 | ratio outside [0.9, 1.1] | mean abs log r "
             "| drift, nats per 1k tokens | sd of Σ log r |",
             "|---|---|---|---|---|---|---|---|---|"]
    for precision, vocab, length in UNIFORM_GRID:
        s = uniform_rows(PUBLISHED[precision], vocab, length)
        lines.append(f"| {precision} ({PUBLISHED[precision]:g}) | {vocab} | {length} | {_fmt(s['token_kl_k1'])} "
                     f"| {_fmt(s['token_kl_k3'])} | {s['outside_band']:.2%} | {_fmt(s['abs_log_ratio'])} "
                     f"| {s['drift_per_1k']:+.3g} | {s['seq_sd']:.3g} |")
    return "\n".join(lines)


def published_table() -> str:
    """The published figures the measured rows are compared with (markdown)."""
    lines = ["| precision | token KL[μ‖π] at the start | drift, nats per 1k tokens | ratio outside [0.9, 1.1] |",
             "|---|---|---|---|"]
    for precision, row in PUBLISHED_ROWS.items():
        lines.append(f"| {precision} | {row['token_kl']} | {row['drift']} | {row['outside']} |")
    return "\n".join(lines)


def task_rows(scale: str, precision: str, seed: int = 0, batches: int = 4) -> dict[str, float]:
    """Statistics of the friction at ``precision``'s level on the initial policy of the case file's
    ``scale``: ``batches`` rollouts of step 0 (8 answers to each of 10 prompts), scored by the learner."""
    from sandbox.runtime.config import RunConfig
    from sandbox.runtime.loop import ActorLearner
    from simulations.cases import load_cases

    task = load_cases().mapping["scales"][scale]
    rows = []
    for b in range(batches):
        cfg = RunConfig(task=task["task"], task_kwargs={**task["task_kwargs"], "samples_per_prompt": 8},
                        estimator="reinforce", steps=1, seed=seed + b,
                        frictions=(("measured_mismatch", {"token_kl": PUBLISHED[precision]}),))
        learner = ActorLearner(cfg)
        rollout = learner.rollout(0)
        with torch.no_grad():
            logp = learner.task.score(learner.params, rollout, grad=False).logp
        rows.append((logp.double(), rollout.behavior_logp.double(), rollout.mask))
    return token_statistics(*(torch.cat(parts, -2) for parts in zip(*rows)))


def task_table() -> str:
    """The case scales' part of the calibration table (markdown)."""
    from simulations.cases import load_cases

    scales = load_cases().mapping["scales"]
    lines = ["| precision (κ) | scale | T | token KL k1 | k3 | ratio outside [0.9, 1.1] | mean abs log r "
             "| drift, nats per 1k tokens | sd of Σ log r |",
             "|---|---|---|---|---|---|---|---|---|"]
    for precision in ("bf16", "fp16"):
        for scale in scales:
            s = task_rows(scale, precision)
            kw = scales[scale]["task_kwargs"]
            length = kw.get("think", 0) + kw.get("H", 10)
            lines.append(f"| {precision} ({PUBLISHED[precision]:g}) | {scale} | {length} | {_fmt(s['token_kl_k1'])} "
                         f"| {_fmt(s['token_kl_k3'])} | {s['outside_band']:.2%} | {_fmt(s['abs_log_ratio'])} "
                         f"| {s['drift_per_1k']:+.3g} | {s['seq_sd']:.3g} |")
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(published_table())
    print()
    print(uniform_table())
    print()
    print(task_table())
