"""TRL 1.16.0's metrics (``sandbox.estimators.trl_metrics``), by hand on a two-answer batch with
Δ = log π_old − log μ = [[ln 2, ln 4, 9 (masked)], [−ln 2, 0, ln 8]]: GRPOTrainer's token ratios 2,
4, ½, 1, 8, answer ratios 8 and 4; AsyncGRPOTrainer's ratio and kl; and the estimator field that
logs them under TRL's names."""

from __future__ import annotations

import math

import pytest
import torch

from sandbox import PGTerms, make_estimator
from sandbox.estimators.trl_metrics import METRICS, trl_sampling_metrics

LN2 = math.log(2.0)
MU = torch.log(torch.tensor([[0.25, 0.2, 0.1], [0.8, 0.3, 0.1]], dtype=torch.float64))  # π_old ≤ 1 at valid tokens
DELTA = torch.tensor([[LN2, 2 * LN2, 9.0], [-LN2, 0.0, 3 * LN2]], dtype=torch.float64)  # 9.0 is masked
MASK = torch.tensor([[True, True, False], [True, True, True]])
DIFF_MEAN, DIFF_MAX = 7 * LN2 / 5, 3 * LN2  # |Δ| over the 5 valid tokens: ln 2 × (1, 2, 1, 0, 3)


def _metrics(mode, clip_max=3.0, clip_min=None, delta=DELTA, mask=MASK, mu=MU):
    out = trl_sampling_metrics(MU + delta, mu, mask, mode, clip_max, clip_min)
    return {k.rsplit("/", 2)[-2] + "/" + k.rsplit("/", 1)[-1]: float(v) for k, v in out.items()}


@pytest.mark.parametrize("mode, clip_max, clip_min, low, mean, high", [
    ("token_truncate", 3.0, None, 0.5, 9.5 / 5, 3.0),        # 2, 3, ½, 1, 3
    ("token_truncate", 3.0, 0.8, 0.8, 9.8 / 5, 3.0),         # 2, 3, 0.8, 1, 3
    ("token_mask", 3.0, 0.6, 0.0, 3.0 / 5, 2.0),             # 2, 0, 0, 1, 0: zeros are counted
    ("token_mask", None, None, 0.5, 15.5 / 5, 8.0),          # no bound: the raw ratios
    ("sequence_truncate", 5.0, None, 4.0, 4.5, 5.0),         # answers: 8 → 5, 4
    ("sequence_mask", 5.0, None, 0.0, 2.0, 4.0),             # 8 → 0, 4
])
def test_values_by_hand(mode, clip_max, clip_min, low, mean, high):
    m = _metrics(mode, clip_max, clip_min)
    assert m["sampling_logp_difference/mean"] == pytest.approx(DIFF_MEAN)
    assert m["sampling_logp_difference/max"] == pytest.approx(DIFF_MAX)
    assert m["importance_sampling_ratio/min"] == pytest.approx(low)
    assert m["importance_sampling_ratio/mean"] == pytest.approx(mean)
    assert m["importance_sampling_ratio/max"] == pytest.approx(high)


def test_names_are_trls_and_members_never_mix():
    assert METRICS == ("sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
                       "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
                       "sampling/importance_sampling_ratio/max")
    both = trl_sampling_metrics(torch.stack([MU + DELTA, MU]), torch.stack([MU, MU]), torch.stack([MASK, MASK]),
                                "token_truncate")
    assert [float(v) for v in both["sampling/importance_sampling_ratio/max"]] == [3.0, 1.0]  # member 2: on-policy
    assert [float(v) for v in both["sampling/sampling_logp_difference/max"]] == pytest.approx([DIFF_MAX, 0.0])


def test_no_valid_token_gives_zero_as_trl_does():
    m = _metrics("token_truncate", mask=torch.zeros_like(MASK))
    assert set(m.values()) == {0.0}


def test_bad_arguments_raise_one_line():
    with pytest.raises(ValueError, match="mode must be one of"):
        trl_sampling_metrics(MU, MU, MASK, "token")
    with pytest.raises(ValueError, match="clip_min must be in"):
        trl_sampling_metrics(MU, MU, MASK, "token_mask", 2.0, 3.0)
    with pytest.raises(ValueError, match="share one shape"):
        trl_sampling_metrics(MU, MU[:1], MASK, "token_mask")
    with pytest.raises(ValueError, match="trl_metrics='grpo' needs rollout_is"):
        make_estimator("ppo", trl_metrics="grpo")
    with pytest.raises(ValueError, match="trl_metrics must be one of"):
        make_estimator("ppo", trl_metrics=True)


def test_the_estimator_logs_them_from_pi_old_without_changing_its_loss():
    logp = (MU + DELTA / 2).clone().requires_grad_(True)  # π_θ differs from π_old: TRL's metrics read π_old
    terms = PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64), mask=MASK,
                    behavior_logp=MU, proximal_logp=MU + DELTA)
    kwargs = {"rollout_is": "token_truncate", "rollout_is_max": 3.0}
    plain = make_estimator("ppo", **kwargs)(terms)
    logged = make_estimator("ppo", trl_metrics="grpo", **kwargs)(terms)
    assert float(plain.loss.detach()) == float(logged.loss.detach())
    assert not any(k.startswith("sampling/") for k in plain.metrics)
    shown = {k: float(v) for k, v in logged.metrics.items() if k.startswith("sampling/")}
    assert shown == {k: float(v) for k, v in trl_sampling_metrics(MU + DELTA, MU, MASK, "token_truncate").items()}
    assert shown["sampling/importance_sampling_ratio/mean"] == pytest.approx(9.5 / 5)
    unbounded = make_estimator("ppo", trl_metrics="grpo", rollout_is="token_mask", rollout_is_max=math.inf)(terms)
    assert float(unbounded.metrics["sampling/importance_sampling_ratio/max"]) == pytest.approx(8.0)  # inf: None


def test_async_grpo_ratio_and_kl_by_hand():
    """r = 2, 4, ½, 1, 8 over the valid tokens: ratio = 15.5/5; kl = mean of r − 1 − ln r."""
    from sandbox.estimators.trl_metrics import trl_async_metrics

    out = {k: float(v) for k, v in trl_async_metrics(MU + DELTA, MU, MASK).items()}
    kl = ((2 - 1 - LN2) + (4 - 1 - 2 * LN2) + (0.5 - 1 + LN2) + 0.0 + (8 - 1 - 3 * LN2)) / 5
    assert out == pytest.approx({"ratio": 15.5 / 5, "kl": kl})
    assert math.isnan(float(trl_async_metrics(MU, MU, torch.zeros_like(MASK))["ratio"]))  # 0/0, as TRL's sums
    terms = PGTerms(logp=MU + DELTA, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64), mask=MASK,
                    behavior_logp=MU)  # π_old = μ: AsyncGRPOTrainer never recomputes it
    logged = make_estimator("ppo", trl_metrics="async_grpo")(terms).metrics
    assert {k: float(logged[k]) for k in ("ratio", "kl")} == pytest.approx({"ratio": 15.5 / 5, "kl": kl})


def test_a_truncate_mode_needs_a_bound_as_grpoconfig_requires():
    """GRPOConfig refuses a ``*_truncate`` mode with neither clip bound (tests/conformance/test_trl_metrics.py);
    so do the metrics, the estimator that logs them and ``sandbox check``."""
    from sandbox.check import map_config

    for mode in ("token_truncate", "sequence_truncate"):
        with pytest.raises(ValueError, match="needs clip_max or clip_min"):
            trl_sampling_metrics(MU, MU, MASK, mode, None, None)
        with pytest.raises(ValueError, match="needs clip_max or clip_min"):
            make_estimator("ppo", rollout_is=mode, rollout_is_max=math.inf, trl_metrics="grpo")
        with pytest.raises(ValueError, match=r"^vllm_importance_sampling_clip_max=None: a \*_truncate mode"):
            map_config({"num_generations": 8, "use_vllm": True, "vllm_importance_sampling_mode": mode,
                        "vllm_importance_sampling_clip_max": None})
    assert _metrics("token_truncate", None, 0.8)["importance_sampling_ratio/min"] == pytest.approx(0.8)  # one: enough
    with pytest.raises(ValueError, match="clip_min must be in"):  # GRPOConfig: clip_min < clip_max
        trl_sampling_metrics(MU, MU, MASK, "token_mask", 2.0, 2.0)


def test_a_token_vllm_could_not_score_is_left_out_as_trl_does():
    """μ NaN on the first token (Δ = ln 2): TRL leaves it out of |Δ|'s mean and max and weights it
    exp(0) = 1; the masked 9.0 stays out. Token ratios 1, 4, ½, 1, 8 (token_mask, no bound); answer
    ratios 4 and 4; an infinite Δ is ±the largest float before the answer's sum, so +∞ − ∞ gives 1."""
    mu = MU.clone()
    mu[0, 0] = math.nan
    m = _metrics("token_mask", None, None, mu=mu)
    assert m["sampling_logp_difference/mean"] == pytest.approx(6 * LN2 / 4)
    assert m["sampling_logp_difference/max"] == pytest.approx(3 * LN2)
    assert m["importance_sampling_ratio/mean"] == pytest.approx(14.5 / 5)
    assert _metrics("sequence_mask", None, None, mu=mu)["importance_sampling_ratio/mean"] == pytest.approx(4.0)
    old = MU + DELTA
    old[1, 0], mu[0, 0], mu[1, 2] = -math.inf, MU[0, 0], -math.inf  # answer 2: Δ = +∞ and −∞
    out = trl_sampling_metrics(old, mu, MASK, "sequence_truncate", 5.0)
    assert float(out["sampling/importance_sampling_ratio/min"]) == 1.0
    assert float(out["sampling/sampling_logp_difference/max"]) == math.inf
