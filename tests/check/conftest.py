"""The tiny battery the end-to-end checks run on: every battery name means it, and its
environments size the deployment cells (a test-only budget, seconds per job)."""

from __future__ import annotations

import pytest

import sandbox.check.api as api
from sandbox.scoring.battery import build

TINY = {
    "name": "tiny-check", "version": 1, "seed": 0, "description": "a test battery: one probe, a tiny reversal",
    "envs": {
        "bandit": {"kind": "probe", "seeds": 2, "metric": "signal_fraction", "random": 0.0, "best": 1.0,
                   "probe": {"K": 5, "B": 10}},
        "reversal": {"kind": "train", "seeds": 2, "metric": "error", "random": 0.5, "best": 0.0,
                     "run": {"task": "reverse_copy", "lr": 1e-3, "steps": 3, "log_points": 1,
                             "task_kwargs": {"H": 2, "V": 2, "eval_mode": "exact", "width": 8, "heads": 1, "layers": 1,
                                             "mlp": 8, "prompts_per_step": 2, "samples_per_prompt": 4}}},
    },
    "cells": [
        {"name": "bandit/rare-failures", "env": "bandit", "friction": "actor bug",
         "probe": {"p_correct": 0.9, "actor": "point_mass", "rho": 0.2}},
        {"name": "reversal/stale", "env": "reversal", "friction": "staleness", "run": {"staleness": {"kind": "fixed", "D": 1}}},
    ],
}


@pytest.fixture
def tiny(monkeypatch):
    """Every battery name means the tiny battery (its environments size the deployment cells too)."""
    monkeypatch.setattr(api, "as_battery", lambda value: build(TINY))
