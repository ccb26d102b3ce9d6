"""The ``paper`` battery: ``standard`` at the figures' full fidelity (10 seeds, MNIST 10k steps,
reversal H = 10 for 3000 steps). Data only; hours on a CPU — run it on a cluster
(``--backend ray``). Changing it bumps ``version``."""

from sandbox.scoring.batteries import uniform_reversal_error

RANDOM_REVERSAL_H10 = uniform_reversal_error(10)  # V = 2, to-first-error reward

BATTERY = {
    "name": "paper",
    "version": 3,
    "extends": "standard",
    "description": "standard at full fidelity: MNIST 10k steps, reversal H = 10 for 3000 steps, "
                   "8 LM seeds for 150 steps",
    "envs": {
        "bandit": {"seeds": 100},
        "mnist": {"run": {"steps": 10_000, "log_points": 8, "task_kwargs": {"eval_size": 0}}},
        "reversal": {"random": RANDOM_REVERSAL_H10, "run": {"steps": 3000, "log_points": 8, "task_kwargs": {
            "H": 10, "eval_mode": "sampled", "eval_prompts": 100, "eval_samples": 10}}},
        "llm": {"seeds": 8, "run": {"steps": 150, "task_kwargs": {"eval_prompts": 256}}},
    },
    "cells": [],
}
