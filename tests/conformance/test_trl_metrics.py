"""TRL 1.16.0's off-policy metrics from its own code beside ``sandbox.estimators.trl_metrics``
(docs/conformance.md): GRPOTrainer's ``sampling/*`` for every vLLM IS mode and bound setting, and
AsyncGRPOTrainer's ``ratio``/``kl``, on the harness's batches (padding, holes, an empty answer, T = 1,
log-ratios to ±25), one with a log-ratio of ±800 (a ratio of ∞ and of 0) and one with no valid
token; each also through ``sandbox check``'s mapping and the estimator that logs them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from .required import require

require("trl")

from sandbox.core.terms import PGTerms  # noqa: E402
from sandbox.estimators import make_estimator  # noqa: E402
from sandbox.estimators.trl_metrics import (  # noqa: E402
    ASYNC_METRICS,
    METRICS,
    MODES,
    trl_async_metrics,
    trl_sampling_metrics,
)

from .harness import BATCHES, F64, make_batch, mapped  # noqa: E402
from .trl_metrics_side import async_metrics, async_trainer, grpo_metrics  # noqa: E402

#: the same float64 arithmetic in another order (TRL: mean of a masked selection; ours: masked sum / count):
#: |ours − theirs| ≤ METRIC_TOL·max(1, |theirs|); ±∞ and NaN must match exactly
METRIC_TOL = 1e-12
#: (vllm_importance_sampling_clip_min, _clip_max): TRL's default, each side alone (the other None), both, neither
BOUNDS = {"default": {}, "max": {"vllm_importance_sampling_clip_max": 2.0},
          "min": {"vllm_importance_sampling_clip_min": 0.5, "vllm_importance_sampling_clip_max": None},
          "both": {"vllm_importance_sampling_clip_min": 0.8, "vllm_importance_sampling_clip_max": 1.2},
          "none": {"vllm_importance_sampling_clip_max": None}}
CASES = (*BATCHES, "extreme", "infinite", "nan_mu", "no_token")


BASE = {"extreme": "unequal", "infinite": "random", "nan_mu": "masked", "no_token": "random"}


def batch(name: str):
    """A harness batch with μ rounded to float32, as TRL holds vLLM's log-probs (both sides get the same);
    'extreme': 'unequal' with log π_old − log μ = +800 and −799.5 and log π_θ − log μ ≈ ±790 on two
    answers; 'infinite': 'random' with Δ = +∞ and −∞ in one answer (μ = 0, π_old = 0) and +∞ in
    another; 'nan_mu': 'masked' with μ NaN (a token vLLM could not score) on a valid and on a masked
    token; 'no_token': 'random' with every token masked."""
    b = make_batch(BASE.get(name, name))
    if name == "infinite":
        old, rollout = b.old.clone(), b.rollout.clone()
        rollout[0, 0], old[0, 1], rollout[5, 2] = -math.inf, -math.inf, -math.inf
        b = replace(b, old=old, rollout=rollout)
    if name == "nan_mu":
        rollout = b.rollout.clone()
        rollout[0, 0] = rollout[(~b.mask).nonzero()[0].tolist()] = math.nan
        b = replace(b, rollout=rollout)
    if name == "extreme":
        logp, old, rollout = b.logp.clone(), b.old.clone(), b.rollout.clone()
        logp[1, 0], old[1, 0], rollout[1, 0] = -10.0, -0.01, -800.01
        logp[3, 2], old[3, 2], rollout[3, 2] = -790.0, -800.0, -0.5
        b = replace(b, logp=logp, old=old, rollout=rollout)
    if name == "no_token":
        b = replace(b, mask=torch.zeros_like(b.mask))
    return replace(b, rollout=b.rollout.float().to(F64))


def _keys(mode: str, bounds: str) -> dict:
    return {"num_generations": 4, "use_vllm": True, "vllm_importance_sampling_mode": mode, **BOUNDS[bounds]}


def _bounds(bounds: str) -> tuple[float | None, float | None]:
    """(clip_max, clip_min) as ``trl_sampling_metrics`` takes them."""
    keys = {"vllm_importance_sampling_clip_max": 3.0, "vllm_importance_sampling_clip_min": None, **BOUNDS[bounds]}
    return keys["vllm_importance_sampling_clip_max"], keys["vllm_importance_sampling_clip_min"]


def gap(ours: float, theirs: float) -> float:
    """|ours − theirs| scaled by max(1, |theirs|); 0 when both are the same ±∞ or both NaN, ∞ otherwise."""
    if math.isnan(theirs) or math.isinf(theirs):
        return 0.0 if (math.isnan(ours) and math.isnan(theirs)) or ours == theirs else math.inf
    return abs(ours - theirs) / max(1.0, abs(theirs))


def assert_metrics_agree(ours: dict, theirs: dict, names: tuple, what: str) -> None:
    assert set(theirs) == set(names), f"{what}: TRL logged {sorted(theirs)}"
    for name in names:
        a, b = float(ours[name]), float(theirs[name])
        assert gap(a, b) <= METRIC_TOL, f"{what}: {name} ours {a!r}, TRL's {b!r}"


#: every mode × bound setting GRPOConfig accepts (not a truncate mode with neither bound: the test below)
SETTINGS = [(mode, bounds) for mode in MODES for bounds in BOUNDS if not (mode.endswith("truncate") and bounds == "none")]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode,bounds", SETTINGS)
def test_sampling_metrics_agree(mode, bounds, case):
    b = batch(case)
    ours = trl_sampling_metrics(b.old, b.rollout, b.mask, mode, *_bounds(bounds))
    assert_metrics_agree(ours, grpo_metrics(_keys(mode, bounds), b), METRICS, f"{mode} {bounds} on {case}")


@pytest.mark.parametrize("mode", [m for m in MODES if m.endswith("truncate")])
def test_truncation_without_bounds_is_refused_as_trl_refuses_it(mode):
    """``GRPOConfig`` refuses a truncate mode with neither bound; so do ours, the estimator and the check."""
    b = batch("random")
    with pytest.raises(ValueError, match="must be set when `vllm_importance_sampling_mode` is a `\\*_truncate`"):
        grpo_metrics(_keys(mode, "none"), b)
    with pytest.raises(ValueError, match="needs clip_max or clip_min"):
        trl_sampling_metrics(b.old, b.rollout, b.mask, mode, None, None)
    with pytest.raises(ValueError, match="needs clip_max or clip_min"):
        make_estimator("ppo", rollout_is=mode, rollout_is_max=math.inf, trl_metrics="grpo")
    with pytest.raises(ValueError, match="vllm_importance_sampling_clip_max=None: a \\*_truncate mode"):
        mapped({"loss_type": "dapo", **_keys(mode, "none")})


@pytest.mark.parametrize("mode,bounds", SETTINGS)
def test_population_members_never_mix(mode, bounds):
    """[P, B, T]: each member's metrics are TRL's on that member alone."""
    members = [batch(name) for name in ("random", "far", "masked", "empty_row", "extreme", "infinite", "nan_mu",
                                        "no_token")]
    ours = trl_sampling_metrics(*(torch.stack([getattr(m, k) for m in members]) for k in ("old", "rollout", "mask")),
                                mode, *_bounds(bounds))
    for p, member in enumerate(members):
        theirs = grpo_metrics(_keys(mode, bounds), member)
        assert_metrics_agree({k: v[p] for k, v in ours.items()}, theirs, METRICS, f"{mode} {bounds}, member {p}")


@pytest.mark.parametrize("case", ["far", "unequal", "extreme"])
@pytest.mark.parametrize("bounds", ["default", "min", "both"])
@pytest.mark.parametrize("mode", MODES)
def test_the_mapped_estimator_logs_trls_metrics(mode, bounds, case):
    """The chain a run takes: ``sandbox check``'s mapping of the config, then the estimator's diagnostics
    (π_old the recomputed proximal policy, μ the behaviour policy). ``PGTerms`` refuses a NaN or
    infinite log-probability, so a run never meets the 'nan_mu' and 'infinite' cases."""
    b = batch(case)
    keys = {"loss_type": "dapo", **_keys(mode, bounds)}
    recipe = mapped(keys).recipe
    estimator = make_estimator(recipe.estimator, **recipe.estimator_kwargs)
    terms = PGTerms(logp=b.logp, advantages=b.advantages, mask=b.mask, behavior_logp=b.rollout, proximal_logp=b.old,
                    group=b.group)
    assert_metrics_agree(estimator(terms).metrics, grpo_metrics(keys, b), METRICS, f"mapped {mode} {bounds} on {case}")


@pytest.mark.parametrize("case", [c for c in CASES if c != "no_token"])
def test_async_metrics_agree(case):
    b = batch(case)
    assert_metrics_agree(trl_async_metrics(b.logp, b.rollout, b.mask), async_metrics(b), ASYNC_METRICS,
                         f"async on {case}")


def test_async_metrics_of_a_batch_without_tokens_are_nan():
    """TRL logs 0/0 = NaN, then its ``compute_loss`` raises (``segment_id.max()`` of no token); ours: NaN."""
    b = batch("no_token")
    t, inputs, model = async_trainer(b)
    with pytest.raises(RuntimeError):
        t.compute_loss(model, inputs)
    theirs = {k: t._metrics["train"][k][-1] for k in ASYNC_METRICS}
    assert all(math.isnan(v) for v in theirs.values())
    assert_metrics_agree(trl_async_metrics(b.logp, b.rollout, b.mask), theirs, ASYNC_METRICS, "async, no token")


@pytest.mark.parametrize("case", ["random", "far", "extreme"])
def test_the_mapped_async_estimator_logs_trls_metrics(case):
    b = batch(case)
    recipe = mapped({"max_staleness": 4, "num_generations": 4}).recipe
    estimator = make_estimator(recipe.estimator, **recipe.estimator_kwargs)
    terms = PGTerms(logp=b.logp, advantages=b.advantages, mask=b.mask, behavior_logp=b.rollout, group=b.group)
    assert_metrics_agree(estimator(terms).metrics, async_metrics(b), ASYNC_METRICS, f"mapped async on {case}")
