"""The matched regime (issue 42; docs/regime.md): runs whose decisive quantities — entropy, the
share of zero-advantage groups, per-update and lag KL, a sampler–learner mismatch that can grow,
answer length and truncation, the low-probability tail — sit where large LLM runs sit.

Composed from one file per part:

* the environment — ``addition`` (``sandbox.envs.sequences.arithmetic``): multi-digit addition as a
  scratchpad then EOS, n-digit operands with n uniform in [1, (T − 3)//5], reward 1 for the right
  final answer, truncated answers ``truncation_reward``; V = 1,024 tokens of which it uses 15;
* the warm start — ``sandbox.policies.warm_start``: the transformer, trained by SFT on the
  environment's solution traces before RL (cached); the traces carry slips (a wrong sum digit at a
  rate ``sft_slip``), so the warm policy errs by sampling, as an LLM does, not by blind spots;
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

from sandbox.core.validation import check_range
from sandbox.envs.sequences.arithmetic import Addition
from sandbox.envs.sequences.environment import SequenceEnvironment
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
    traces a step, each column's sum digit slipped at ``sft_slip``) before RL; 16 prompts × 8 samples
    a step, as the regime's cost target."""

    default_optimizer = "adamw"
    #: the largest lr of a pilot (base seed 5; docs/regime.md, "Choosing the lr") whose control neither
    #: saturates nor freezes through 1,000 steps; its lag-10 KL is ≈ 10× below the published one
    default_lr = 1.5e-5

    answer_len: int = 21  # T: 1–3 digits (docs/regime.md: 21 on CPUs; 64 the cost benchmark; 256+ on a GPU)
    prompts_per_step: int = 16
    samples_per_prompt: int = 8
    eval_prompts: int = 64
    eval_samples: int = 4
    sft_steps: int = 1500  # SFT fit to its traces (docs/regime.md, "Why a warm start with slips")
    sft_lr: float = 3e-3
    sft_prompts: int = 64
    #: the traces' slip rate per column (``Addition.slipped_answers``), in [0, 1): a starting pass rate
    #: of ≈ (0.5 + 0.5² + 0.5³)/3 = 29% at T = 21, its errors draws spread over every prompt (docs/regime.md)
    sft_slip: float = 0.5
    #: the slips' spread over column contexts (``Addition.slipped_answers``), in [0, 1]: 0 uniform slips
    #: (RL only sharpens a right argmax); > 0 systematic confusions, each (a_i, b_i, c_i) at its own rate
    #: and wrong digit, so RL must correct column by column (docs/regime.md)
    sft_slip_spread: float = 0.0

    def __post_init__(self) -> None:
        check_range("sft_slip", self.sft_slip, low=0.0, high=1.0, high_open=True)
        check_range("sft_slip_spread", self.sft_slip_spread, low=0.0, high=1.0)
        super().__post_init__()

    def build_policy(self):
        """The transformer, warm-started on the environment's solution traces (with slips at
        ``sft_slip``, spread over column contexts by ``sft_slip_spread``)."""
        key = repr(self.env) + (f" slip={self.sft_slip!r}" if self.sft_slip else "") + \
            (f" spread={self.sft_slip_spread!r}" if self.sft_slip_spread else "")
        traces = lambda n, g: self.environment.solution_traces(n, g, self.sft_slip, self.sft_slip_spread)  # noqa: E731
        return WarmStarted(super().build_policy(), traces,
                           key, self.sft_steps, self.sft_lr, self.sft_prompts,
                           sources=(type(self.env).__module__, SequenceEnvironment.__module__))


__all__ = ["RECIPE", "AdditionTask", "RegimeTask"]
