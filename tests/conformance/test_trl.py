"""TRL's ``GRPOTrainer`` loss for every ``loss_type`` × ``importance_sampling_level``, its vLLM
importance-sampling correction in each mode, ``delta``, ``epsilon_high``, off-policy masking and its
group advantages (``scale_rewards``), beside what ``sandbox check`` maps them to (docs/conformance.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from .required import require

require("trl")

from .harness import AGREED, TOL, assert_agree, differ, make_batch, mapped, our_advantages, our_loss  # noqa: E402
from .trl_side import trl_advantages, trl_loss  # noqa: E402

LEVELS = ("token", "sequence")
#: (loss_type, level) pairs the check maps; the others it refuses (TRL only warns for them)
MAPPED = [("grpo", "token"), ("grpo", "sequence"), ("bnpo", "token"), ("bnpo", "sequence"), ("dapo", "token"),
          ("dapo", "sequence"), ("dr_grpo", "token"), ("dr_grpo", "sequence"), ("cispo", "token"), ("sapo", "token"),
          ("luspo", "sequence"), ("vespo", "token"), ("vespo", "sequence")]
REFUSED = [("cispo", "sequence"), ("sapo", "sequence"), ("luspo", "token")]
KNOBS = {"cispo": {"epsilon_high": 5.0}, "sapo": {"sapo_temperature_pos": 2.0, "sapo_temperature_neg": 0.7},
         "vespo": {"vespo_k_pos": 1.5, "vespo_lambda_neg": 2.5}}
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def _keys(loss: str, level: str, batch, **more) -> dict:
    keys = {"loss_type": loss, "importance_sampling_level": level, "num_generations": 4, "epsilon": 0.2,
            "epsilon_high": 0.28, "max_completion_length": batch.mask.shape[-1], **KNOBS.get(loss, {}), **more}
    return keys


def _own(batch):
    """Without vLLM TRL samples with the trainer's own model: μ = π_old."""
    return replace(batch, rollout=batch.old)


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("loss,level", MAPPED)
def test_loss_agrees(loss, level, batch):
    b = _own(make_batch(batch))
    keys = _keys(loss, level, b)
    assert_agree(our_loss(mapped(keys), b), trl_loss(keys, b), f"TRL {loss} × {level} on {batch}")


@pytest.mark.parametrize("loss,level", REFUSED)
def test_unmapped_levels_are_refused(loss, level):
    with pytest.raises(ValueError, match="importance_sampling_level"):
        mapped(_keys(loss, level, make_batch("random")))


@pytest.mark.parametrize("batch", ["random", "far", "unequal"])
@pytest.mark.parametrize("loss", ["grpo", "dapo", "bnpo", "dr_grpo"])
def test_delta_is_a_dual_clip(loss, batch):
    """TRL's two-sided clip min(r, δ) (INTELLECT-2) is our dual clip δ when δ > 1 + ε_high."""
    b = _own(make_batch(batch))
    keys = _keys(loss, "token", b, delta=1.5)
    m = mapped(keys)
    assert m.recipe.estimator_kwargs["dual_clip"] == 1.5
    assert_agree(our_loss(m, b), trl_loss(keys, b), f"TRL {loss} delta=1.5 on {batch}")


def test_delta_at_or_below_the_clip_is_refused():
    with pytest.raises(ValueError, match="delta"):
        mapped(_keys("dapo", "token", make_batch("random"), delta=1.2))


def _with_modes(pairs):
    return [(loss, level, mode) for loss, level in pairs for mode in IS_MODES
            if not (level == "sequence" and loss != "luspo" and mode.startswith("token"))]


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("loss,level,mode", _with_modes([("dapo", "token"), ("grpo", "sequence"), ("cispo", "token"),
                                                          ("sapo", "token"), ("dr_grpo", "token"),
                                                          ("luspo", "sequence"), ("bnpo", "sequence")]))
def test_vllm_correction_agrees(loss, level, mode, batch):
    b = make_batch(batch)
    keys = _keys(loss, level, b, use_vllm=True, vllm_importance_sampling_mode=mode,
                 vllm_importance_sampling_clip_max=2.0)
    assert_agree(our_loss(mapped(keys), b), trl_loss(keys, b), f"TRL {loss} × vLLM {mode} on {batch}")


@pytest.mark.parametrize("mode", IS_MODES)
@pytest.mark.parametrize("bounds", [{"vllm_importance_sampling_clip_min": 0.5},
                                    {"vllm_importance_sampling_cap": 1.5},
                                    {"vllm_importance_sampling_clip_min": 0.8, "vllm_importance_sampling_clip_max": 1.2}])
def test_vllm_correction_bounds(mode, bounds):
    """``clip_min``, ``clip_max`` and the deprecated ``cap`` (which GRPOConfig copies into clip_max)."""
    b = make_batch("far")
    keys = _keys("dapo", "token", b, use_vllm=True, vllm_importance_sampling_mode=mode, **bounds)
    assert_agree(our_loss(mapped(keys), b), trl_loss(keys, b), f"TRL vLLM {mode} {bounds}")


def test_vllm_correction_off():
    b = make_batch("far")
    keys = _keys("dapo", "token", b, use_vllm=True, vllm_importance_sampling_correction=False)
    m = mapped(keys)
    assert "rollout_is" not in m.recipe.estimator_kwargs
    assert_agree(our_loss(m, b), trl_loss(keys, b), "TRL with vLLM, correction off")


@pytest.mark.parametrize("vllm", [False, True])
@pytest.mark.parametrize("batch", AGREED)
def test_off_policy_masking_agrees(batch, vllm):
    b = make_batch(batch) if vllm else _own(make_batch(batch))
    keys = _keys("dapo", "token", b, off_policy_mask_threshold=0.05, use_vllm=vllm,
                 vllm_importance_sampling_mode="token_truncate")
    assert_agree(our_loss(mapped(keys), b), trl_loss(keys, b), f"TRL OPSM (vLLM {vllm}) on {batch}")


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("scale", ["group", "none", True, False])
def test_advantages_agree(scale, batch):
    b = make_batch(batch)
    keys = {"num_generations": 4, "scale_rewards": scale}
    torch.testing.assert_close(our_advantages(mapped(keys), b), trl_advantages(keys, b), rtol=TOL, atol=TOL)


def test_batch_scaling_is_refused():
    with pytest.raises(ValueError, match="scale_rewards"):
        mapped({"num_generations": 4, "scale_rewards": "batch"})


@pytest.mark.parametrize("loss", ["grpo", "sapo", "luspo", "dr_grpo"])
def test_an_empty_answer_counts_in_trls_sequence_mean(loss):
    """D2: TRL's grpo, sapo, luspo and dr_grpo divide by every completion of the batch, a wholly
    masked one included (``.mean()``, ``per_token_loss.size(0)``); ours, like verl, by the answers
    with at least one token. The sandbox never masks a whole answer."""
    level = "sequence" if loss == "luspo" else "token"
    b = _own(make_batch("empty_row"))
    keys = _keys(loss, level, b)
    ours, theirs = our_loss(mapped(keys), b), trl_loss(keys, b)
    n, n_valid = b.mask.shape[0], int(b.mask.any(-1).sum())
    assert differ(ours, theirs) > 1e-3
    assert_agree((ours[0] * n_valid / n, ours[1] * n_valid / n), theirs, f"TRL {loss}, rescaled by B_valid/B")


def test_dr_grpo_divides_by_max_completion_length():
    """D8: TRL's dr_grpo divides by ``max_completion_length``, ours by the batch's padded length:
    equal when answers are padded to the maximum (the sandbox's answers have one fixed length)."""
    b = _own(make_batch("unequal"))
    keys = _keys("dr_grpo", "token", b, max_completion_length=3 * b.mask.shape[-1])
    ours, theirs = our_loss(mapped(keys), b), trl_loss(keys, b)
    assert_agree((ours[0] / 3, ours[1] / 3), theirs, "dr_grpo at 3× the padded length")


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask"])
@pytest.mark.parametrize("loss", ["grpo", "dapo"])
def test_sequence_ratio_with_token_weights_is_refused(loss, mode):
    """D9: at ``importance_sampling_level='sequence'`` TRL's ratio is one value per answer, so token
    weights multiply it and every token's gradient carries the answer's mean weight; verl's gspo (and
    ours) keeps a per-token ratio sg(s)·π/sg(π), so each token carries its own weight. Same loss value,
    different gradient: the check refuses the combination."""
    b = make_batch("random")
    keys = _keys(loss, "sequence", b, use_vllm=True, vllm_importance_sampling_mode=mode)
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        mapped(keys)
    m = mapped({**keys, "vllm_importance_sampling_mode": mode.replace("token", "sequence")})
    kwargs = {**m.recipe.estimator_kwargs, "rollout_is": mode}  # what the mapping would give: per-token weights
    per_token = replace(m, recipe=replace(m.recipe, estimator_kwargs=kwargs))
    (ours, our_grad), (theirs, their_grad) = our_loss(per_token, b), trl_loss(keys, b)
    assert float(abs(ours - theirs)) <= TOL  # the same loss value
    assert float((our_grad - their_grad).abs().max()) > 1e-3  # not the same gradient
    for row in range(b.mask.shape[0]):  # TRL: one gradient per answer, spread evenly over its tokens
        assert torch.allclose(their_grad[row], their_grad[row, :1].expand_as(their_grad[row]))
