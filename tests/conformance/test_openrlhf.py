"""OpenRLHF's ``PolicyLoss`` (openrlhf 0.11.2, ``openrlhf/models/loss.py``) beside ours. ``sandbox
check`` does not read OpenRLHF configs (it refuses them), so each OpenRLHF setting is compared with
the identically named option of a config the check does read, through its mapping: PPO with a dual
clip (verl ``clip_ratio_c``), token- or sequence-level aggregation (TRL ``dapo``/``grpo``), GSPO (TRL
``importance_sampling_level='sequence'``), TIS and IcePop (TRL's vLLM correction)."""

from __future__ import annotations

import sys
import types

import pytest

from .required import require

openrlhf = require("openrlhf")
require("deepspeed")


def _loss_module():
    """``openrlhf.models.loss`` without ``openrlhf/models/__init__.py``, which imports the actor
    model and flash-attn (CUDA only); the loss module itself needs torch and deepspeed."""
    if "openrlhf.models.loss" not in sys.modules:
        package = types.ModuleType("openrlhf.models")
        package.__path__ = [openrlhf.__path__[0] + "/models"]
        sys.modules.setdefault("openrlhf.models", package)
    import openrlhf.models.loss as loss

    return loss


PolicyLoss = _loss_module().PolicyLoss

from dataclasses import replace  # noqa: E402

from .harness import AGREED, assert_agree, make_batch, mapped, our_loss  # noqa: E402

A = "actor_rollout_ref.actor."
#: (OpenRLHF PolicyLoss kwargs, the config whose mapping names the same loss, whether μ is read)
PAIRS = {
    "ppo-token": ({"clip_eps_low": 0.2, "clip_eps_high": 0.28},
                  {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28}, False),
    "ppo-sequence-mean": ({"clip_eps_low": 0.2, "clip_eps_high": 0.28, "token_level_loss": False},
                          {"loss_type": "grpo", "epsilon": 0.2, "epsilon_high": 0.28}, False),
    "ppo-dual-clip": ({"clip_eps_low": 0.2, "clip_eps_high": 0.2, "dual_clip": 3.0},
                      {"algorithm.adv_estimator": "grpo", A + "clip_ratio_c": 3.0}, False),
    "gspo": ({"clip_eps_low": 3e-4, "clip_eps_high": 4e-4, "policy_loss_type": "gspo"},
             {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
             False),
    "tis": ({"is_correction_level": "token", "is_correction_mode": "clip", "is_correction_threshold": (0.5, 5.0)},
            {"loss_type": "dapo", "use_vllm": True, "vllm_importance_sampling_mode": "token_truncate",
             "vllm_importance_sampling_clip_min": 0.5, "vllm_importance_sampling_clip_max": 5.0}, True),
    "icepop": ({"is_correction_level": "token", "is_correction_mode": "mask", "is_correction_threshold": (0.5, 5.0)},
               {"loss_type": "dapo", "use_vllm": True, "vllm_importance_sampling_mode": "token_mask",
                "vllm_importance_sampling_clip_min": 0.5, "vllm_importance_sampling_clip_max": 5.0}, True),
}


def _theirs(kwargs: dict, batch, engine: bool):
    logp = batch.logp.clone().requires_grad_(True)
    loss, *_ = PolicyLoss(**kwargs)(logp, batch.old, batch.advantages.unsqueeze(-1), action_mask=batch.mask.double(),
                                    rollout_log_probs=batch.rollout if engine else None)
    import torch

    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_policy_loss_agrees(pair, batch):
    kwargs, config, engine = PAIRS[pair]
    b = make_batch(batch)
    if not engine:  # no engine log-probs read: the trainer's own sampler, μ = π_old
        b = replace(b, rollout=b.old)
    assert_agree(our_loss(mapped(config), b), _theirs(kwargs, b, engine), f"OpenRLHF {pair} on {batch}")
