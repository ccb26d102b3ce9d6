"""verl's rollout-correction metrics (``sandbox.estimators.rollout_corr``), by hand on a two-answer
batch: log r = [[ln 2, 0], [−ln 2, (masked)]]; and the estimator field that logs them. The same
metrics beside verl's own function: tests/conformance/test_verl_rollout_corr_metrics.py."""

from __future__ import annotations

import math

import pytest
import torch

from sandbox import PGTerms, make_estimator
from sandbox.estimators.rollout_corr import rollout_corr_metrics

MU = torch.log(torch.tensor([[0.25, 0.5], [0.8, 0.3]], dtype=torch.float64))
LOG_R = torch.tensor([[math.log(2.0), 0.0], [-math.log(2.0), 5.0]], dtype=torch.float64)  # 5.0 is masked
MASK = torch.tensor([[True, True], [True, False]])
EPS = 1e-8  # verl's masked_mean adds it to the token count, and the ESS to the mean weight


def _metrics(level, upper=2.0, lower=None):
    return {k: float(v) for k, v in rollout_corr_metrics(MU + LOG_R, MU, MASK, level, upper, lower).items()}


def test_kl_and_chi2_need_no_level():
    m = _metrics(None)
    assert set(m) == {"kl", "chi2_token", "chi2_seq"}
    assert m["kl"] == pytest.approx(0.0, abs=1e-12)  # (−ln 2 + 0 + ln 2)/3
    assert m["chi2_token"] == pytest.approx((4 + 1 + 0.25) / (3 + EPS) - 1)  # mean r² − 1
    assert m["chi2_seq"] == pytest.approx((4 + 0.25) / 2 - 1)  # rows' (Π r)² = 4, 1/4


@pytest.mark.parametrize("level, upper, lower, weights", [
    ("token", 2.0, None, [2.0, 1.0, 0.5]),        # TIS at 2: nothing above
    ("token", 1.5, None, [1.5, 1.0, 0.5]),        # TIS at 1.5
    ("token", 1.5, 0.6, [0.0, 1.0, 0.0]),         # IcePop: zero outside [0.6, 1.5]
    ("sequence", 2.0, None, [2.0, 2.0, 0.5]),     # the row's product broadcast over its tokens
    ("sequence", 1.5, None, [1.5, 1.5, 0.5]),
])
def test_is_weight_mean_std_and_ess_by_hand(level, upper, lower, weights):
    m = _metrics(level, upper, lower)
    w = torch.tensor(weights, dtype=torch.float64)
    mean, mean_sq = w.sum() / (3 + EPS), w.square().sum() / (3 + EPS)
    assert m["rollout_is_mean"] == pytest.approx(float(mean))
    assert m["rollout_is_std"] == pytest.approx(math.sqrt(float(mean_sq - mean**2)))
    assert m["rollout_is_eff_sample_size"] == pytest.approx(float(1 / ((w / (mean + EPS)).square().sum() / (3 + EPS))))


def test_values_by_hand_at_the_token_level():
    m = _metrics("token")
    assert m["rollout_is_mean"] == pytest.approx(7 / 6)
    assert m["rollout_is_std"] == pytest.approx(math.sqrt(1.75 - (7 / 6) ** 2))
    assert m["rollout_is_eff_sample_size"] == pytest.approx((7 / 6) ** 2 / 1.75)


def test_log_ratios_are_bounded_at_20_before_exp():
    m = {k: float(v) for k, v in rollout_corr_metrics(torch.tensor([[30.0]]), torch.zeros(1, 1),
                                                      torch.ones(1, 1, dtype=torch.bool), "sequence").items()}
    assert m["chi2_token"] == pytest.approx(math.exp(40) - 1, rel=1e-6)
    assert m["rollout_is_mean"] == pytest.approx(2.0) and m["rollout_is_std"] == 0.0  # one token: std 0


def test_bad_arguments_raise_one_line():
    with pytest.raises(ValueError, match="level must be one of"):
        rollout_corr_metrics(MU, MU, MASK, "geometric")
    with pytest.raises(ValueError, match="lower must be in"):
        rollout_corr_metrics(MU, MU, MASK, "token", 2.0, 3.0)
    with pytest.raises(ValueError, match="share one shape"):
        rollout_corr_metrics(MU, MU[:1], MASK, "token")
    with pytest.raises(ValueError, match="verl_metrics must be"):
        make_estimator("ppo", verl_metrics=("token", -1.0, None))


def test_the_estimator_logs_them_from_pi_old_without_changing_its_loss():
    logp = (MU + LOG_R).clone().requires_grad_(True)
    old = MU + LOG_R / 2  # a recomputed π_old that differs from π_θ: the decoupled metrics read it
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64), mask=MASK,
                    behavior_logp=MU, proximal_logp=old)
    plain = make_estimator("ppo")(terms)
    logged = make_estimator("ppo", verl_metrics=["token", 2.0, None])(terms)
    assert float(plain.loss.detach()) == float(logged.loss.detach())
    assert not any(k.startswith("rollout_corr/") for k in plain.metrics)
    expected = rollout_corr_metrics(old, MU, MASK, "token")
    assert {k: float(v) for k, v in logged.metrics.items() if k.startswith("rollout_corr/")} == \
        {f"rollout_corr/{k}": float(v) for k, v in expected.items()}
    bypass = PGTerms(logp=logp, advantages=terms.advantages, mask=MASK, behavior_logp=MU)  # π_old = μ: π_θ is read
    assert float(make_estimator("ppo", verl_metrics=("token", 2.0, None))(bypass).metrics["rollout_corr/kl"]) == \
        pytest.approx(0.0, abs=1e-12)
