"""verl's ``rollout_corr/*`` metrics — what ``sandbox check``'s alarms read — computed by the mapped
estimator (``Estimator.verl_metrics``) beside verl 0.9.1's own ``compute_rollout_correction_and_rejection_mask``
on the same batch, for every rollout-correction preset the check reads: decoupled from π_old, bypass
from π_θ, each at its level and truncation; and the metrics the mapping says the run logs are exactly
those verl returns among the alarms' (docs/check.md, "Alarms")."""

from __future__ import annotations

import math

import pytest
import torch

from .required import require

require("verl.trainer.ppo.rollout_corr_helper")

from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask  # noqa: E402

from sandbox.analysis.alarms import VERL_ALARMS  # noqa: E402
from sandbox.core.terms import PGTerms  # noqa: E402
from sandbox.estimators.base import make_estimator  # noqa: E402

from .harness import AGREED, make_batch, mapped  # noqa: E402
from .test_verl_rollout_correction import PRESETS, REFUSED, _kept, _preset  # noqa: E402
from .verl_side import rollout_correction  # noqa: E402

ALARMED = {a.verl for a in VERL_ALARMS}


def _ours(mapping, batch) -> dict[str, float]:
    recipe = mapping.recipe
    estimator = make_estimator(recipe.estimator, **recipe.estimator_kwargs)
    terms = PGTerms(logp=batch.logp, advantages=batch.advantages, mask=batch.mask, behavior_logp=batch.rollout,
                    proximal_logp=batch.old if mapping.deployment.proximal == "recompute" else None,
                    group=batch.group, generator=torch.Generator().manual_seed(0))
    out = estimator(terms).metrics
    return {k: float(v) for k, v in out.items() if k.startswith("rollout_corr/")}


def _verl(config: dict, mapping, batch) -> dict[str, float]:
    rc = rollout_correction(config)
    bypass = mapping.deployment.proximal == "behavior"
    _, _, metrics = compute_rollout_correction_and_rejection_mask(
        old_log_prob=batch.logp if bypass else batch.old, rollout_log_prob=batch.rollout,
        response_mask=batch.mask.to(torch.float64), rollout_is=rc.rollout_is,
        rollout_is_threshold=rc.rollout_is_threshold, rollout_rs=rc.rollout_rs,
        rollout_rs_threshold=rc.rollout_rs_threshold)
    return metrics


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("preset", [p for p in PRESETS if p not in REFUSED] + ["default"])
def test_alarm_metrics_are_verls(preset, batch):
    config = _preset(preset) if preset != "default" else {"algorithm.adv_estimator": "grpo",
                                                          "actor_rollout_ref.rollout.n": 4}
    mapping = mapped(config)
    b = _kept(make_batch(batch))
    ours, theirs = _ours(mapping, b), _verl(config, mapping, b)
    assert set(mapping.logs) == {k for k in theirs if k in ALARMED} | {"rollout_corr/chi2_seq"} & set(theirs)
    assert set(mapping.logs) <= set(ours)
    for key in mapping.logs:
        assert math.isclose(ours[key], theirs[key], rel_tol=1e-9, abs_tol=1e-9), \
            f"verl {preset} on {batch}: {key} ours {ours[key]!r}, verl's {theirs[key]!r}"
