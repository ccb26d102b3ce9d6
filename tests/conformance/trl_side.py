"""TRL's side of the comparison (TRL 1.16.0): ``GRPOTrainer._compute_loss`` called on a minimal
trainer — ``object.__new__(GRPOTrainer)`` with the attributes ``__init__`` sets from ``GRPOConfig``
(its own lines, executed), a stub accelerator of one process, and a model forward that returns the
batch's log π_θ — and the two computations TRL has inline in ``_generate_and_score_completions``,
the vLLM importance-sampling ratio and the group advantages, executed from its own source text
(``harness.source_block``). Import only after ``require('trl') (conftest.py)``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import tempfile
import types
import warnings

import torch
import trl.trainer.grpo_trainer as grpo_module
from trl import GRPOConfig, GRPOTrainer

from .harness import Batch, run_block, source_block

#: the __init__ lines that set what ``_compute_loss`` reads (start marker, end marker)
INIT_BLOCKS = (("# Training arguments", "self.use_transformers_continuous_batching = args"),
               ("self.pad_to_multiple_of = args.pad_to_multiple_of", "# MoE load-balancing"),
               ("self.scale_rewards = args.scale_rewards", "# Datasets"),
               ("# Multi-step", "# Tracks the number of iterations"),
               ("self.beta = args.beta", "if self.beta == 0.0:"))
IS_BLOCK = ("# Compute the importance sampling ratio when using vLLM", "# Compute the per-token log probabilities for")
ADVANTAGE_BLOCK = ("unscorable_mask = torch.isnan(rewards_per_func)", "# Slice to keep only the local part")
_OUTPUT_DIR = tempfile.mkdtemp(prefix="trl-conformance-")


def grpo_config(keys: dict) -> GRPOConfig:
    """A real ``GRPOConfig`` with ``keys`` (on CPU, no logging)."""
    return _grpo_config(tuple(sorted(keys.items())))


@functools.cache
def _grpo_config(items: tuple) -> GRPOConfig:
    keys = dict(items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(output_dir=_OUTPUT_DIR, use_cpu=True, bf16=False, report_to="none", **keys)


class _Accelerator:
    """One process: gather/reduce are the identity."""

    num_processes, process_index, sync_gradients = 1, 0, True

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def trainer(args: GRPOConfig, logp: torch.Tensor) -> GRPOTrainer:
    """A ``GRPOTrainer`` holding only what ``_compute_loss`` reads; its model scores ``logp``."""
    t = object.__new__(GRPOTrainer)
    namespace = {**vars(grpo_module), "self": t, "args": args, "model": torch.nn.Linear(1, 1)}
    for start, end in INIT_BLOCKS:
        run_block(source_block(GRPOTrainer.__init__, start, end), namespace)
    t.args = args  # transformers' Trainer.__init__
    t.aux_loss_enabled = False  # no mixture-of-experts model
    t.model = types.SimpleNamespace(training=True)
    t.accelerator = _Accelerator()
    t._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    t.current_gradient_accumulation_steps = args.gradient_accumulation_steps
    t._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros_like(logp), None)
    return t


def importance_sampling_ratio(args: GRPOConfig, batch: Batch) -> torch.Tensor:
    """TRL's vLLM IS ratio: sg(π_old/μ), per token or per sequence, truncated or masked."""
    t = trainer(args, batch.logp)
    namespace = {**vars(grpo_module), "self": t, "old_per_token_logps": batch.old,
                 "sampling_per_token_logps": batch.rollout, "completion_mask": batch.mask.long(), "tool_mask": None}
    return run_block(source_block(GRPOTrainer._generate_and_score_completions, *IS_BLOCK), namespace)[
        "vllm_importance_sampling_ratio"]


def trl_loss(keys: dict, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, d loss / d log π_θ) from ``GRPOTrainer._compute_loss`` on ``batch``."""
    args = grpo_config(keys)
    logp = batch.logp.clone().requires_grad_(True)
    B, T = batch.mask.shape
    inputs = {"prompt_ids": torch.zeros(B, 0, dtype=torch.long), "prompt_mask": torch.zeros(B, 0, dtype=torch.long),
              "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": batch.mask.long(),
              "advantages": batch.advantages, "old_per_token_logps": batch.old,
              "num_items_in_batch": batch.mask.sum()}
    if args.use_vllm:
        inputs["sampling_per_token_logps"] = batch.rollout
        if args.vllm_importance_sampling_correction:
            inputs["importance_sampling_ratio"] = importance_sampling_ratio(args, batch)
    loss = trainer(args, logp)._compute_loss(None, inputs)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


def trl_advantages(keys: dict, batch: Batch) -> torch.Tensor:
    """TRL's group advantages (one reward function, weight 1) for ``batch``'s rewards; the batch's
    groups must be consecutive runs of ``num_generations``, as TRL lays them out."""
    args = grpo_config(keys)
    t = trainer(args, batch.logp)
    t.reward_weights, t.reward_funcs = torch.ones(1, dtype=torch.float64), [None]
    namespace = {**vars(grpo_module), "self": t, "rewards_per_func": batch.rewards.unsqueeze(-1), "device": "cpu",
                 "num_generations": args.num_generations, "math": math}
    return run_block(source_block(GRPOTrainer._generate_and_score_completions, *ADVANTAGE_BLOCK), namespace)[
        "advantages"]


def fields() -> set[str]:
    return {f.name for f in dataclasses.fields(GRPOConfig)}
