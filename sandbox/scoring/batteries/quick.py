"""The ``quick`` battery: every friction on the bandits (exact probes), MNIST and token reversal.

Data only. Sized for ≤ 5 minutes of a new estimator's runs on 2 cores (see docs/scoring.md, "Score an
estimator"). Changing anything here changes the battery's hash: bump ``version`` and record the new
hash in ``versions.py`` (tests/scoring/test_battery.py fails until you do).
"""

from sandbox.frictions.panels import panel_settings
from sandbox.scoring.batteries import uniform_reversal_error

#: the reversal cells pin the to-first-error reward (``match``): the sequence figures use
#: 'per_position', whose uniform error is 1 − 1/V = 0.5
RANDOM_REVERSAL_H3 = uniform_reversal_error(3)

BATTERY = {
    "name": "quick",
    "version": 2,
    "description": "bandit probes (exact), MNIST under staleness/label flips/an actor bug, "
                   "token reversal (H = 3) under each friction and all four at once, and under the "
                   "inference engine's frictions (top-p reported as the full softmax under a lag, partial "
                   "rollouts, dropping stale rollouts)",
    "seed": 0,
    "envs": {
        "bandit": {
            "kind": "probe", "seeds": 16, "metric": "signal_fraction", "random": 0.0, "best": 1.0,
            "probe": {"K": 10, "B": 100},
        },
        "mnist": {
            "kind": "train", "seeds": 8, "metric": "error", "random": 0.9, "best": 0.0,
            "run": {"task": "mnist", "task_kwargs": {"batch_size": 100, "split": "test10k", "eval_size": 1000},
                    "advantage": "confidence", "optimizer": "adam", "lr": 1e-3, "steps": 500, "log_points": 4},
        },
        "reversal": {
            "kind": "train", "seeds": 8, "metric": "error", "random": RANDOM_REVERSAL_H3, "best": 0.0,
            "run": {"task": "reverse_copy",
                    "task_kwargs": {"H": 3, "V": 2, "match": "to_first_error", "eval_mode": "exact"},
                    "optimizer": "adam", "lr": 3e-4, "steps": 300, "log_points": 4},
        },
    },
    "cells": [
        {"name": "bandit/rare-failures", "env": "bandit", "friction": "actor bug",
         "probe": {"p_correct": 0.99, "actor": "point_mass", "rho": 0.1}},
        {"name": "bandit/rare-successes", "env": "bandit", "friction": "rare discovery",
         "probe": {"p_correct": 0.01, "actor": "discovery", "rho": 0.1}},
        {"name": "bandit/stale-actor", "env": "bandit", "friction": "staleness",
         "probe": {"p_correct": 0.99, "actor": "stale", "p_actor": 0.5}},
        {"name": "mnist/stale-D4", "env": "mnist", "friction": "staleness",
         "run": panel_settings([("staleness", 4)], {"history": "rollouts"})},
        {"name": "mnist/stale-D128", "env": "mnist", "friction": "staleness",
         "run": panel_settings([("staleness", 128)], {"history": "rollouts"})},
        {"name": "mnist/label-flip", "env": "mnist", "friction": "reward corruption",
         "run": {"frictions": [["label_flip", {"p": 0.3}]]}},
        {"name": "mnist/actor-bug", "env": "mnist", "friction": "actor bug",
         "run": panel_settings([("actor bug", 0.2)])},
        {"name": "reversal/stale-D8", "env": "reversal", "friction": "staleness",
         "run": panel_settings([("staleness", 8)])},
        {"name": "reversal/landmine", "env": "reversal", "friction": "actor bug",
         "run": panel_settings([("actor bug", 0.1)])},
        {"name": "reversal/reward-flip", "env": "reversal", "friction": "reward corruption",
         "run": panel_settings([("reward corruption", 0.2)])},
        {"name": "reversal/rare-discovery", "env": "reversal", "friction": "rare discovery",
         "run": panel_settings([("rare discovery", 0.05)])},
        {"name": "reversal/all-four", "env": "reversal", "friction": "all four",
         "run": panel_settings([("staleness", 4), ("actor bug", 0.1), ("reward corruption", 0.1),
                                ("rare discovery", 0.02)])},
        # the inference engine's frictions (docs/environments.md, "Frictions of real inference engines"); the drop
        # cell's score is its error after the same 300 steps, so the updates lost to dropped
        # batches count against it (the scorecard also reports the fraction of prompts dropped)
        # top-p with the engine's raw log-probs (vLLM's default) under a 4-step lag: the IS ratio's μ
        # is the stale policy's full softmax, not the truncated distribution sampled (without the
        # lag the reported μ is π_θ itself and REINFORCE, TIS, PPO and DG scored within 0.02)
        {"name": "reversal/top-p-full-D4", "env": "reversal", "friction": "inference engine",
         "run": panel_settings([("staleness", 4), ("top-p (full report)", 0.1)])},
        {"name": "reversal/partial-k3", "env": "reversal", "friction": "inference engine",
         "run": panel_settings([("partial rollouts", 3)], {"staleness": {"kind": "uniform", "D": 8}, "history": "params"})},
        {"name": "reversal/drop-stale", "env": "reversal", "friction": "inference engine",
         "run": panel_settings([("drop admission", 6)], {"staleness": {"kind": "uniform", "D": 8}})},  # budget 2
    ],
}
