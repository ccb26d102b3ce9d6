"""The matched regime (issue 42; docs/regime.md): runs whose decisive quantities — entropy, the
share of zero-advantage groups, per-update and lag KL, a sampler–learner mismatch that can grow,
answer length and truncation, the low-probability tail — sit where large LLM runs sit.

Composed from one file per part:

* the environment — ``addition`` (``sandbox.envs.sequences.arithmetic``): multi-digit addition as a
  scratchpad then EOS, n-digit operands with n uniform in [1, (T − 3)//5], reward 1 for the right
  final answer, truncated answers ``truncation_reward``; V = 1,024 tokens of which it uses 15;
* the warm start — ``sandbox.policies.warm_start``: the transformer, trained by SFT on the
  environment's solution traces before RL (cached);
* the mismatch that follows the weights — the ``sampler_rounding`` friction
  (``sandbox.frictions.rounding``), a run's ``frictions`` entry;
* the optimiser recipe of published runs — AdamW, weight decay 0.1, gradient clip 1.0, constant lr:
  ``RECIPE`` (a run's ``optimizer``, ``optimizer_kwargs`` and ``controllers``;
  ``simulations/regime.py`` builds the runs).

``addition`` is the same problem learnt from a random initialisation (no warm start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandbox.envs.sequences.arithmetic import Addition
from sandbox.policies.warm_start import WarmStarted
from sandbox.tasks.base import TASKS, register_task
from sandbox.tasks.sequences import register_sequence_env

register_sequence_env("addition")(Addition)
AdditionTask = TASKS.get("addition")

#: the optimiser recipe of published runs (shared/spec/published-quantities.md, "optimiser recipes"):
#: AdamW, constant lr, weight decay 0.1, gradient clip 1.0; β and ε as the run sets them
RECIPE: dict[str, Any] = {
    "optimizer": "adamw",
    "optimizer_kwargs": {"betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1},
    "controllers": (("clip_grad_norm", {"max_norm": 1.0}),),
}


@register_task("regime")
@dataclass
class RegimeTask(AdditionTask):  # type: ignore[misc, valid-type]
    """``addition`` warm-started by SFT (``sft_steps`` Adam steps at ``sft_lr`` on ``sft_prompts``
    prompts a step) before RL; 16 prompts × 8 samples a step, as the regime's cost target."""

    default_optimizer = "adamw"
    default_lr = 3e-5  # lag-10 KL in the published range (docs/regime.md, calibration)

    answer_len: int = 16  # T (docs/regime.md: 16 on CPUs; 64 the cost benchmark; 256+ on a GPU)
    prompts_per_step: int = 16
    samples_per_prompt: int = 8
    eval_prompts: int = 64
    eval_samples: int = 4
    sft_steps: int = 130  # a starting pass rate of ≈ 10–40% at T = 16 (docs/regime.md)
    sft_lr: float = 3e-3
    sft_prompts: int = 64

    def build_policy(self):
        """The transformer, warm-started on the environment's solution traces."""
        return WarmStarted(super().build_policy(), lambda n, g: self.environment.solution_traces(n, g), repr(self.env),
                           self.sft_steps, self.sft_lr, self.sft_prompts)


__all__ = ["RECIPE", "AdditionTask", "RegimeTask"]
