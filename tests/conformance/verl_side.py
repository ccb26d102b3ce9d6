"""verl's side of the comparison: its own functions at the pinned version (verl 0.9.1), called as
its trainer calls them (``verl/trainer/ppo/ray_trainer.py`` fit → ``compute_rollout_correction_and_
add_to_batch`` or ``apply_bypass_mode``, ``compute_advantage``; ``verl/workers/utils/losses.py``
``ppo_loss`` → ``get_policy_loss_fn(loss_mode)(…)``), on the config keys the check reads. Import
only after ``require('verl.trainer.ppo.core_algos') (conftest.py)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.trainer.config.algorithm import AlgoConfig, RolloutCorrectionConfig
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.rollout_corr_helper import (
    apply_bypass_mode,
    compute_rollout_correction_and_add_to_batch,
)
from verl.workers.config.actor import ActorConfig, PolicyLossConfig

from .harness import Batch

A, R, G, C = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "algorithm.", "algorithm.rollout_correction."


def _section(flat: dict, prefix: str, cls) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k[len(prefix):]: v for k, v in flat.items() if k.startswith(prefix) and k[len(prefix):] in names}


def rollout_correction(flat: dict) -> RolloutCorrectionConfig:
    """verl's ``algorithm.rollout_correction`` from the config's keys over the YAML's defaults
    (``rollout_is: null``; the dataclass's own default is 'sequence', the YAML's wins in a run)."""
    keys = {"rollout_is": None, **_section(flat, C, RolloutCorrectionConfig)}
    return RolloutCorrectionConfig(**keys)


def actor_config(flat: dict, policy_loss: dict | None = None) -> ActorConfig:
    """verl's ``ActorConfig`` from the config's ``actor_rollout_ref.actor.*`` keys (infrastructure
    keys the loss never reads are filled with placeholders)."""
    loss = {**_section(flat, A + "policy_loss.", PolicyLossConfig), **(policy_loss or {})}
    kwargs = {k: v for k, v in _section(flat, A, ActorConfig).items() if k != "policy_loss"}
    kwargs.setdefault("ppo_micro_batch_size_per_gpu", 1)
    return ActorConfig(strategy="fsdp", rollout_n=int(flat.get(R + "n", 1)), policy_loss=PolicyLossConfig(**loss),
                       **kwargs)


def verl_loss(flat: dict, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, d loss / d log π_θ) as verl's trainer computes it for ``flat`` on ``batch``."""
    rc = rollout_correction(flat)
    old, mask, weights = batch.old, batch.mask.long(), None
    policy_loss = {}
    if rc.bypass_mode:  # old_log_probs := rollout_log_probs, loss_mode := 'bypass_mode'
        data = DataProto.from_dict(tensors={"rollout_log_probs": batch.rollout, "old_log_probs": batch.old})
        section = OmegaConf.create({"loss_mode": flat.get(A + "policy_loss.loss_mode", "vanilla")})
        apply_bypass_mode(data, rc, section)
        old, policy_loss = data.batch["old_log_probs"], {"loss_mode": section["loss_mode"], "rollout_correction": rc}
    elif flat.get(R + "calculate_log_probs", True):  # the batch carries rollout_log_probs
        data = DataProto.from_dict(tensors={"old_log_probs": batch.old, "rollout_log_probs": batch.rollout,
                                            "response_mask": mask})
        data, _ = compute_rollout_correction_and_add_to_batch(data, rc)
        mask = data.batch["response_mask"]
        weights = data.batch["rollout_is_weights"] if "rollout_is_weights" in data.batch.keys() else None
    config = actor_config(flat, policy_loss)
    logp = batch.logp.clone().requires_grad_(True)
    fn = core_algos.get_policy_loss_fn(config.policy_loss.get("loss_mode", "vanilla"))
    loss, _ = fn(old_log_prob=old, log_prob=logp, advantages=batch.advantages.unsqueeze(-1) * batch.mask,
                 response_mask=mask.to(bool), loss_agg_mode=config.loss_agg_mode, config=config,
                 rollout_is_weights=weights)
    (grad,) = torch.autograd.grad(loss, logp, allow_unused=True)
    return loss.detach(), torch.zeros_like(logp) if grad is None else grad


def verl_advantages(flat: dict, batch: Batch) -> torch.Tensor:
    """A per sequence as verl's ``compute_advantage`` gives it (outcome reward on the last valid
    token; the per-token advantage read at the first token, which every estimator here broadcasts)."""
    estimator = flat.get(G + "adv_estimator", "gae")
    mask = batch.mask.long()
    last = (torch.arange(mask.shape[-1]) * mask).argmax(-1)  # the last valid token holds the reward
    rewards = torch.zeros(mask.shape, dtype=torch.float64)
    rewards[torch.arange(len(last)), last] = batch.rewards
    index = np.array([f"prompt-{int(g)}" for g in batch.group], dtype=object)
    algo = AlgoConfig(adv_estimator=estimator, **{k[len(G):]: v for k, v in flat.items()
                                                  if k.startswith(G) and "." not in k[len(G):]
                                                  and k[len(G):] in {f.name for f in dataclasses.fields(AlgoConfig)}
                                                  and k[len(G):] != "adv_estimator"})
    if estimator == "grpo":
        advantages, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=rewards, response_mask=mask, index=index,
            norm_adv_by_std_in_grpo=flat.get(G + "norm_adv_by_std_in_grpo", True))
    else:
        advantages, _ = core_algos.get_adv_estimator_fn(estimator)(
            token_level_rewards=rewards, response_mask=mask, config=algo, index=index)
    return advantages[:, 0]
