"""TRL's side of the metrics comparison (TRL 1.16.0; docs/conformance.md): the methods that log the
metrics, called whole on a minimal trainer, their inputs made from our batch — no line of theirs
sliced or re-typed. Import only after ``require('trl')``.

- ``GRPOTrainer._generate_and_score_completions`` on ``trl_side.trainer`` (``__init__``'s own lines
  set the config's attributes), with ``_generate`` returning the batch's answers (right-padded by
  TRL's ``pad``; holes inside an answer as the ``tool_mask`` TRL multiplies in) and vLLM's log μ,
  the model's forward returning log π_old, and one reward function. TRL builds μ with
  ``torch.tensor(list)`` (float32), so the caller gives μ already rounded to float32.
- ``AsyncGRPOTrainer.compute_loss`` on ``object.__new__(AsyncGRPOTrainer)``, its packed batch made by
  TRL's own collator (``DataCollatorForRollout``, ``TreeRow``) from one sample per answer (vLLM's
  log μ in float32, as the rollout worker stores it) and a model whose forward gives, at each packed
  position, log π_θ of the token it predicts.
"""

from __future__ import annotations

import collections
import types
import warnings

import numpy as np
import torch

from .harness import Batch
from .trl_side import _Accelerator, grpo_config, trainer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # TRLExperimentalWarning
    from trl.experimental.async_grpo.async_grpo_trainer import (
        AsyncGRPOTrainer,
        DataCollatorForRollout,
    )
    from trl.experimental.async_grpo.packing import TreeRow

SAMPLING = "sampling/"


def _lengths(mask: torch.Tensor) -> list[int]:
    """Each answer's length: up to its last valid token (at least 1); TRL right-pads the rest."""
    T = mask.shape[-1]
    last = torch.where(mask, torch.arange(1, T + 1), torch.zeros((), dtype=torch.long)).amax(-1)
    return last.clamp(min=1).tolist()


def grpo_metrics(keys: dict, batch: Batch) -> dict[str, float]:
    """The ``sampling/*`` metrics ``GRPOTrainer._generate_and_score_completions`` logs for ``batch``
    (π_old = ``batch.old``, μ = ``batch.rollout``, valid tokens ``batch.mask``) under ``keys``."""
    args = grpo_config(keys)
    t = trainer(args, batch.logp)
    B, T = batch.mask.shape
    lengths = _lengths(batch.mask)

    def generate(prompts):  # (prompt ids, completion ids, tool mask, completions, vLLM log-probs, extras, images ×2)
        assert len(prompts) == B
        return ([[0]] * B, [[1 + b * T + i for i in range(n)] for b, n in enumerate(lengths)],
                [batch.mask[b, :n].long().tolist() for b, n in enumerate(lengths)], [""] * B,
                [batch.rollout[b, :n].tolist() for b, n in enumerate(lengths)], None, None, None)

    def forward(model, ids, attention_mask, logits_to_keep, **_):  # the trainer's model: log π_old
        return batch.old[:, :logits_to_keep], None, None

    t._generate, t._get_per_token_logps_and_entropies = generate, forward
    t._calculate_rewards = lambda *a: batch.rewards.unsqueeze(-1)
    t.reward_weights, t.reward_funcs, t.reward_func_names = torch.ones(1, dtype=torch.float64), [None], ["reward"]
    t.accelerator.device, t.accelerator.is_main_process = "cpu", True
    t.model = types.SimpleNamespace(training=True, is_gradient_checkpointing=False)
    t._tokenizer = types.SimpleNamespace(pad_token_id=0)
    t.environment_factories = t.tools = t.environments = None
    t._logs = {"prompt": [], "completion": [], "advantages": [], "rewards": collections.defaultdict(list),
               "extra": collections.defaultdict(list)}
    t._pending_extra_logs, t._pending_metrics = {}, {}
    t._generate_and_score_completions([{"prompt": "p"} for _ in range(B)])
    return {k: v[-1] for k, v in t._metrics["train"].items() if k.startswith(SAMPLING)}


def _samples(batch: Batch) -> list[dict]:
    """One rollout sample per answer (prompt token, then its T tokens; ids unique, so nothing is shared
    in TRL's prefix trie), as the async rollout worker yields them."""
    B, T = batch.mask.shape
    return [{"input_ids": np.array([B * T + 1 + b] + [1 + b * T + i for i in range(T)], dtype=np.int64),
             "completion_mask": np.array([0] + batch.mask[b].long().tolist(), dtype=np.int64),
             "old_log_probs": np.array([0.0] + batch.rollout[b].tolist(), dtype=np.float32),
             "advantage": float(batch.advantages[b]), "group_id": int(batch.group[b]), "metrics": {}}
            for b in range(B)]


def async_trainer(batch: Batch) -> tuple[AsyncGRPOTrainer, dict, object]:
    """(trainer, packed inputs, model) for one ``AsyncGRPOTrainer.compute_loss`` call on ``batch``:
    π_old = vLLM's μ (``batch.rollout``), π_θ = ``batch.logp``."""
    row = TreeRow()
    for sample in _samples(batch):
        row.add(sample)
    inputs = DataCollatorForRollout(pad_token_id=0).torch_call([[row]])
    flat = torch.cat([batch.logp.new_zeros(1), batch.logp.flatten()])  # token id i ↦ log π_θ (ids 1..B·T)

    def model(input_ids, shift_labels, **_):  # log π_θ of the token each packed position predicts
        labels = shift_labels.clamp(min=0)  # −100 (not trained) ↦ 0
        return types.SimpleNamespace(log_probs=flat[labels], entropy=torch.zeros_like(flat[labels]))

    t = object.__new__(AsyncGRPOTrainer)
    t.accelerator, t.aux_loss_enabled, t.current_gradient_accumulation_steps = _Accelerator(), False, 1
    t.epsilon_low, t.epsilon_high = 0.2, 0.28
    t._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    for name in ("_step_forward_s", "_step_forward_tokens", "_step_trained_tokens", "_step_seq_len_weighted",
                 "_step_samples"):
        setattr(t, name, 0.0)
    return t, inputs, model


def async_metrics(batch: Batch) -> dict[str, float]:
    """``ratio`` and ``kl`` as ``AsyncGRPOTrainer.compute_loss`` logs them for ``batch``."""
    t, inputs, model = async_trainer(batch)
    t.compute_loss(model, inputs)
    return {k: t._metrics["train"][k][-1] for k in ("ratio", "kl")}


__all__ = ["async_metrics", "async_trainer", "grpo_metrics"]
