"""The early-warning signals every run logs (sandbox.diagnostics.SIGNALS): hand-computed values and
their presence at every logged step."""

import math

import pytest
import torch

from sandbox.core.terms import PGTerms
from sandbox.diagnostics import SIGNALS, token_entropy
from sandbox.estimators import make_estimator
from sandbox.estimators.base import behavior_diagnostics
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import train

TINY = dict(H=2, width=16, heads=2, layers=1, mlp=32, prompts_per_step=3, samples_per_prompt=3, eval_prompts=4,
            eval_samples=2, population=2)


def test_log_ratio_signals_by_hand():
    logp = torch.log(torch.tensor([[[0.5, 0.25], [0.2, 0.4]]]))
    mu = torch.log(torch.tensor([[[0.25, 0.25], [0.4, 0.1]]]))
    mask = torch.tensor([[[True, True], [True, False]]])
    d = behavior_diagnostics(logp, mu, mask)
    # |log r| on valid tokens: log 2, 0, log 2 (the masked log 4 is left out)
    assert d["log_ratio_abs_mean"].item() == pytest.approx(2 * math.log(2) / 3)
    assert d["log_ratio_abs_max"].item() == pytest.approx(math.log(2))


def test_token_entropy_by_hand():
    logits = torch.tensor([[[[0.0, 0.0, 0.0, 0.0]], [[100.0, 0.0, 0.0, 0.0]], [[math.log(3), 0.0, -math.inf, -math.inf]]]], dtype=torch.float64)
    mask = torch.ones(1, 3, 1, dtype=torch.bool)
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert token_entropy(logits, mask).item() == pytest.approx((math.log(4) + 0.0 + h) / 3, abs=1e-12)
    mask[0, 0, 0] = False
    assert token_entropy(logits, mask).item() == pytest.approx(h / 2, abs=1e-12)


def test_rollout_correction_fractions_by_hand():
    logp = torch.log(torch.tensor([[[0.5], [0.25], [0.2], [0.9]]])).requires_grad_()
    mu = torch.log(torch.tensor([[[0.1], [0.25], [0.4], [0.3]]]))  # π/μ: 5, 1, 0.5, 3
    terms = PGTerms(logp=logp, advantages=torch.ones(1, 4), behavior_logp=mu, proximal_logp=logp.detach())
    trunc = make_estimator("reinforce", rollout_is="token_truncate", rollout_is_max=2.0)(terms).metrics
    assert trunc["rollout_is_clip_frac"].item() == pytest.approx(0.5)  # 5 and 3 are truncated
    masked = make_estimator("reinforce", rollout_is="token_mask", rollout_is_max=4.0, rollout_is_min=0.8)(terms).metrics
    assert masked["rollout_is_mask_frac"].item() == pytest.approx(0.5)  # 5 and 0.5 fall outside [0.8, 4]


def test_every_run_logs_the_signals_at_every_logged_step():
    cfg = RunConfig(task="reverse_copy", task_kwargs=TINY, estimator="ppo", steps=6, log_points=4, seed=2,
                    staleness={"kind": "fixed", "D": 2})
    frame = train(cfg)
    logged = frame[frame["step"] > 0]
    for column in ("ess_frac", "kl_k1", "kl_k3", "log_ratio_abs_mean", "log_ratio_abs_max", "grad_norm", "entropy",
                   "clip_frac"):
        assert column in SIGNALS and logged[column].notna().all(), column
    assert logged[logged["step"] > 1]["cos_consecutive"].notna().all()
    assert (logged["entropy"] > 0).all() and (logged["entropy"] <= math.log(2) + 1e-9).all()  # V = 2
    bandit = train(RunConfig(task="bandit", task_kwargs=dict(N=3, K=5, batch_size=8, population=2), steps=3,
                             log_points=2))
    assert bandit[bandit["step"] > 0]["entropy"].between(0, math.log(5) + 1e-9).all()
