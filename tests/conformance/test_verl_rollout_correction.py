"""verl's rollout correction — every ``RolloutCorrectionConfig`` preset at the pin, decoupled (three
policies, IS weights sg(π_old/μ)) and bypass (π_old = μ, rejection sampling, REINFORCE with IS) —
beside the estimator ``sandbox check`` maps it to (docs/conformance.md)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace

import pytest

from .required import require

require("verl.trainer.ppo.core_algos")

from verl.trainer.config.algorithm import RolloutCorrectionConfig  # noqa: E402

from .harness import AGREED, assert_agree, differ, make_batch, mapped, our_loss  # noqa: E402
from .verl_side import A, C, R, verl_loss  # noqa: E402

PRESETS = sorted(n for n in dir(RolloutCorrectionConfig)
                 if n.startswith(("decoupled_", "bypass_")) and callable(getattr(RolloutCorrectionConfig, n)))
#: presets the check refuses, and the key it names
REFUSED = {"decoupled_geo_rs": "rollout_rs", "decoupled_seq_is_rs": "rollout_rs", "decoupled_k3_rs": "rollout_rs",
           "decoupled_geo_rs_seq_tis": "rollout_rs", "decoupled_geo_rs_token_tis": "rollout_rs",
           "decoupled_k3_rs_seq_tis": "rollout_rs", "decoupled_k3_rs_token_tis": "rollout_rs",
           "bypass_pg_geo_rs_seq_tis": "rollout_is", "bypass_pg_geo_rs_token_tis": "rollout_is"}
BASE = {"algorithm.adv_estimator": "grpo", R + "n": 4, A + "clip_ratio_low": 0.2, A + "clip_ratio_high": 0.2}


def _preset(name: str, **base) -> dict:
    preset = getattr(RolloutCorrectionConfig, name)()
    return {**BASE, **base, **{C + f.name: getattr(preset, f.name) for f in dataclasses.fields(preset)
                               if not f.name.startswith("_")}}


def test_every_preset_is_covered():
    assert len(PRESETS) >= 17 and set(REFUSED) <= set(PRESETS)


def _kept(batch):
    """``batch`` with μ = π_θ on half its answers, which any rejection test keeps (a batch whose every
    token is rejected is D5 below)."""
    rollout = batch.rollout.clone()
    rollout[::2] = batch.logp[::2]
    return replace(batch, rollout=rollout)


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum"])
@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("preset", [p for p in PRESETS if p not in REFUSED])
def test_preset_agrees(preset, batch, aggregation):
    config = _preset(preset, **{A + "loss_agg_mode": aggregation})
    b = _kept(make_batch(batch))
    assert_agree(our_loss(mapped(config), b), verl_loss(config, b), f"verl {preset} {aggregation} on {batch}")


@pytest.mark.parametrize("preset", ["bypass_ppo_clip_geo_rs", "bypass_pg_geo_rs"])
def test_every_token_rejected_is_nan_in_verl_and_no_update_here(preset):
    """D5: when rejection sampling drops every token of the batch, verl's ``agg_loss`` divides by
    zero valid tokens (loss and gradient NaN); ours divides by max(1, 0) (loss 0, no update)."""
    config = _preset(preset)
    b = make_batch("far")
    (ours, our_grad), (theirs, _) = our_loss(mapped(config), b), verl_loss(config, b)
    assert float(ours) == 0.0 and float(our_grad.abs().max()) == 0.0
    assert math.isnan(float(theirs))


@pytest.mark.parametrize("preset", sorted(REFUSED))
def test_unmodelled_presets_are_refused(preset):
    with pytest.raises(ValueError, match=REFUSED[preset]):
        mapped(_preset(preset))


@pytest.mark.parametrize("c", [3.0, 10.0])
@pytest.mark.parametrize("preset", ["bypass_ppo_clip_geo_rs", "bypass_ppo_clip_k3_rs"])
def test_rejection_with_ppo_clip_applies_clip_ratio_c(preset, c):
    """M6: verl's bypass PPO-clip is ``compute_policy_loss_vanilla``, whose dual clip is the
    configured ``clip_ratio_c``; the mapping passes it (it used to say "not applied")."""
    config = _preset(preset, **{A + "clip_ratio_c": c})
    m = mapped(config)
    assert m.recipe.estimator_kwargs["dual_clip"] == c
    b = _kept(make_batch("far"))
    assert_agree(our_loss(m, b), verl_loss(config, b), f"{preset} c={c}")


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_rollout_is_needs_calculate_log_probs(level):
    """verl corrects in decoupled mode only when the batch carries the engine's log-probs
    (``ray_trainer.py``: ``"rollout_log_probs" in batch.batch``): with ``calculate_log_probs: False``
    no weight applies there, and none here."""
    config = {**BASE, C + "rollout_is": level, R + "calculate_log_probs": False}
    m = mapped(config)
    assert "rollout_is" not in m.recipe.estimator_kwargs
    b = make_batch("far")
    assert_agree(our_loss(m, b), verl_loss(config, b), f"rollout_is={level} without calculate_log_probs")
    on = mapped({**config, R + "calculate_log_probs": True})
    assert on.recipe.estimator_kwargs["rollout_is"] == f"{level}_truncate"


def test_bypass_without_engine_log_probs_is_refused():
    with pytest.raises(ValueError, match="calculate_log_probs"):
        mapped({**BASE, C + "bypass_mode": True, R + "calculate_log_probs": False})


#: clip_cov zeroes a random draw of its eligible tokens (D7); with ratio 1 it zeroes them all
DETERMINISTIC = {"clip_cov": {A + "policy_loss.clip_cov_ratio": 1.0, A + "policy_loss.clip_cov_lb": -1.0,
                              A + "policy_loss.clip_cov_ub": 0.05}}


def _within_safety_bound(batch):
    """``batch`` without its two tokens whose |log π_old/μ| exceeds verl's SAFETY_BOUND of 20."""
    old = batch.old.clone()
    far = (old - batch.rollout).abs() > 20
    old[far] = batch.rollout[far]
    return replace(batch, old=old)


@pytest.mark.parametrize("loss", ["vanilla", "gspo", "cispo", "sapo", "kl_cov", "gpg", "clip_cov"])
@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("batch", AGREED)
def test_decoupled_weights_compose_with_every_loss(loss, level, batch):
    """The rollout_is weights multiply any registered loss's per-token loss (verl passes
    ``rollout_is_weights`` to every policy loss function)."""
    config = {**BASE, **DETERMINISTIC.get(loss, {}), A + "policy_loss.loss_mode": loss, C + "rollout_is": level,
              C + "rollout_is_threshold": 1.5}
    b = _within_safety_bound(make_batch(batch))
    assert_agree(our_loss(mapped(config), b), verl_loss(config, b), f"{loss} × rollout_is={level} on {batch}")


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_weights_past_the_safety_bound(level):
    """D6: verl clamps log(π_old/μ) to ±20 before the exp (``SAFETY_BOUND``); ours does not. With
    an unclipped loss (kl_cov) on a token where π_θ/π_old ≈ e^25 and π_old/μ ≈ e^-25 the products
    differ (e^25·e^-20 vs 1); within ±20 they agree (above)."""
    config = {**BASE, A + "policy_loss.loss_mode": "kl_cov", C + "rollout_is": level}
    b = make_batch("far")
    assert differ(our_loss(mapped(config), b), verl_loss(config, b)) > 1e-2


def test_geo_mean_with_sequence_weights_agrees_and_token_weights_are_refused():
    config = {**BASE, A + "policy_loss.loss_mode": "geo_mean", C + "rollout_is": "sequence"}
    b = make_batch("unequal")
    assert_agree(our_loss(mapped(config), b), verl_loss(config, b), "geo_mean × sequence IS")
    with pytest.raises(ValueError, match="rollout_is"):
        mapped({**config, C + "rollout_is": "token"})
