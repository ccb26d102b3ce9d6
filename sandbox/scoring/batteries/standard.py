"""The ``standard`` battery: ``quick`` with more seeds and longer budgets, plus a tiny Hugging Face
causal LM under real staleness on Ray (rollout workers 16 learner versions behind). Data only;
sized for ≤ 60 minutes of a new estimator's runs on 2 cores. Changing it bumps ``version``."""

from sandbox.frictions.panels import panel_settings
from sandbox.scoring.batteries import uniform_reversal_error

RANDOM_REVERSAL_H4 = uniform_reversal_error(4)  # V = 2, to-first-error reward

BATTERY = {
    "name": "standard",
    "version": 3,
    "extends": "quick",
    "description": "quick with 10 seeds and longer budgets (reversal H = 4), plus a tiny Qwen2-style LM "
                   "reversing three letters under a 16-step lag on Ray; top-p reported as the truncated "
                   "distribution (the pair of quick's full report) and partial rollouts with stale tokens masked",
    "envs": {
        "bandit": {"seeds": 32},
        "mnist": {"seeds": 10, "run": {"steps": 1500, "task_kwargs": {"eval_size": 2000}}},
        "reversal": {"seeds": 10, "random": RANDOM_REVERSAL_H4,
                     "run": {"steps": 1000, "task_kwargs": {"H": 4}}},
        "llm": {
            # one model per run: seeds are separate runs (population 1); the error's floor is 0 and
            # a uniform policy over the character vocabulary answers (almost) nothing right
            "kind": "train", "seeds": 3, "batched": False, "metric": "error", "random": 1.0, "best": 0.0,
            "run": {"task": "hf_text", "lr": 3e-3, "steps": 100, "log_points": 4,
                    "task_kwargs": {"env": "reverse", "env_kwargs": {"length": 3, "alphabet": "ab"},
                                    "max_new_tokens": 3, "prompts_per_step": 8, "samples_per_prompt": 8,
                                    "eval_prompts": 128}},
        },
    },
    "cells": [
        # the other engine setting of quick's top-p cell: the processed (truncated) log-probs, the
        # same lag; the pair isolates what the engine reports
        {"name": "reversal/top-p-truncated-D4", "env": "reversal", "friction": "inference engine",
         "run": panel_settings([("staleness", 4), ("top-p (truncated report)", 0.1)])},
        # partial rollouts whose tokens staler than 2 versions are masked at the learner
        {"name": "reversal/partial-mask", "env": "reversal", "friction": "inference engine",
         "run": panel_settings([("mask admission", 6), ("partial rollouts", 3)],  # budget 2
                               {"staleness": {"kind": "uniform", "D": 8}, "history": "params"})},
        {"name": "llm/ray-stale-16", "env": "llm", "friction": "staleness",
         "run": {"staleness": {"kind": "fixed", "D": 16}}, "async": {"n_workers": 1}},
    ],
}
