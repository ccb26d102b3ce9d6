"""Golden runs: a small config per task under staleness and each single friction, frozen before the
actor/learner split (issue 10) so that the restructured code can be checked against them (within
the float32 tolerance of ``tolerance.py``: bit for bit only holds on the CPU that froze them).

Each case runs a few learner steps through ``ActorLearner`` and records every rollout tensor, the
logged metrics and the final parameters. ``python -m tests.golden.cases --write`` re-freezes them
(only after an intended change of numbers, said in the commit).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner
from tests.golden.tolerance import FROZEN  # the CPU capability the data were frozen on

DATA = Path(__file__).parent / "data"
STEPS = 4

TINY_SEQ = dict(H=3, width=16, heads=2, layers=1, mlp=32, prompts_per_step=3, samples_per_prompt=3,
                eval_prompts=6, eval_samples=2, population=2)
TASKS = {
    "bandit": ("bandit", dict(N=3, K=5, batch_size=8, samples_per_context=2, population=2, init_std=0.5),
               "group_mean"),
    "bandit_exact": ("bandit", dict(N=3, K=5, population=2, init_std=0.5, mode="exact"), "constant"),
    "gaussian_bandit": ("gaussian_bandit", dict(batch_size=8, samples_per_context=2, population=2, init_std=0.5),
                        "group_mean"),
    "mnist": ("mnist", dict(batch_size=6, samples_per_context=2, population=2, hidden=8, train_size=64,
                            eval_size=32), "group_mean"),
    **{p: (p, dict(TINY_SEQ), "group_mean") for p in ("reverse_copy", "bit_parity", "key_value", "subsequence_match")},
    "hf_text": ("hf_text", dict(env="reverse", env_kwargs={"length": 2}, hidden=16, layers=1, heads=2,
                                prompts_per_step=3, samples_per_prompt=2, eval_prompts=4), "group_mean"),
}
FRICTIONS = {
    "none": (),
    "landmine": (("landmine", {"p_bug": 0.3}),),
    "rare_discovery": (("rare_discovery", {"p_disc": 0.3}),),
    "logit_noise": (("logit_noise", {"sigma": 0.5}),),
    "eps_random": (("eps_random", {"eps": 0.2}),),
    "quantized": (("quantized", {"bits": 4}),),
    "bernoulli_reward": (("bernoulli_reward", {"p": 0.3}),),
    "gaussian_reward": (("gaussian_reward", {"sigma": 0.3}),),
}
EXTRA_FRICTIONS = {  # frictions that only some tasks take
    "label_flip": ((("label_flip", {"p": 0.3}),), ("bandit", "mnist")),
    "poison_token": ((("poison_token", {"token": 0, "penalty": 0.5}),), ("reverse_copy", "hf_text")),
    "precision_mismatch": ((("precision_mismatch", {"sampler_dtype": "bfloat16"}),), ("reverse_copy", "hf_text")),
}
ESTIMATOR_VARIANTS = {  # other learner paths: recomputed proximal policy, screened Kondo
    "decoupled_ppo": ("decoupled_ppo", {}, ("bandit", "reverse_copy", "hf_text")),
    "kondo": ("kondo", {"pct": 0.5}, ("reverse_copy",)),
}


def cases() -> dict[str, RunConfig]:
    out: dict[str, RunConfig] = {}
    for tname, (task, kwargs, adv) in TASKS.items():
        base = RunConfig(task=task, task_kwargs=kwargs, estimator="tis", advantage=adv, lr=1e-2, seed=3,
                         steps=STEPS, log_points=3)
        for fname, frictions in FRICTIONS.items():
            if tname == "bandit_exact" and fname in ("bernoulli_reward", "gaussian_reward", "landmine", "rare_discovery"):
                continue  # exact mode enumerates μ: it takes no row overrides or reward noise (an error)
            out[f"{tname}-{fname}"] = base.replace(frictions=frictions)
        out[f"{tname}-stale"] = base.replace(staleness={"kind": "fixed", "D": 2})
        out[f"{tname}-stale-rollouts"] = base.replace(staleness={"kind": "uniform", "D": 2}, history="rollouts")
        for fname, (frictions, only) in EXTRA_FRICTIONS.items():
            if tname in only:
                out[f"{tname}-{fname}"] = base.replace(frictions=frictions)
        for ename, (est, ekw, only) in ESTIMATOR_VARIANTS.items():
            if tname in only:
                out[f"{tname}-{ename}"] = base.replace(estimator=est, estimator_kwargs=ekw,
                                                       staleness={"kind": "fixed", "D": 1})
    return out


def record(config: RunConfig) -> dict:
    """Every rollout tensor, the per-step metrics and the final parameters of ``config``."""
    learner = ActorLearner(config)
    rollouts, metrics = [], []
    for step in range(config.steps):
        r = learner.rollout(step)
        rollouts.append({k: getattr(r, k).clone() for k in ("actions", "mask", "behavior_logp",
                                                             "true_behavior_logp", "rewards", "version")})
        m = learner.update(step, r, diagnostics=step == config.steps - 1)
        metrics.append({k: v.detach().clone() for k, v in m.items()})
        learner.after_update(step + 1)
    evaluation = learner.evaluate(config.steps)
    return {"rollouts": rollouts, "metrics": metrics, "params": [p.detach().clone() for p in learner.params],
            "evaluate": {k: v.clone() for k, v in evaluation.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    torch.set_num_threads(1)  # the test runs single-threaded: HF matmuls differ at 1e-7 across thread counts
    for name, config in cases().items():
        if args.names and not any(n in name for n in args.names):
            continue
        path = DATA / f"{name}.pt"
        if args.write:
            torch.save(record(config), path)
            print("wrote", path)
    if args.write:  # the capability they were frozen on: bit for bit there, a stated tolerance elsewhere
        FROZEN.write_text(json.dumps({"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                                      "torch": torch.__version__, "cpu": platform.processor() or platform.machine()},
                                     indent=1) + "\n")


if __name__ == "__main__":
    main()
