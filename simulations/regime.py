"""The matched regime's probe (issue 42; docs/regime.md): the quantities that decide a large run's
fate, measured on a run of the ``regime`` task.

``probe(config, every)`` drives the run's ``ActorLearner`` one step at a time. At **every step**, on
the batch the learner consumes (tokens sampled by μ, the actor's possibly stale or rounded policy;
π_t the learner at that step; means over valid tokens, i.e. up to and including EOS):

=====================  =========================================================================
``reward``             mean training reward
``zero_adv_frac``      share of groups whose rewards are all equal (zero advantage for every row)
``truncated``          share of rows with no EOS in T tokens; ``length`` mean answer tokens
``tail_mass``          share of sampled tokens with μ(a) < 1e-3
``kl_k1``, ``kl_k3``   KL(μ‖π_t) per token, k1 = E[log μ − log π], k3 = E[r − 1 − log r] (the
                       learner's own signals; with no delay this is the sampler–learner mismatch,
                       with a delay of k it is the lag-KL plus the mismatch)
``grad_norm``          the estimator's gradient norm before the clip
=====================  =========================================================================

and **every** ``every`` steps:

=====================  =========================================================================
``entropy``            mean token entropy of π_t on the batch, nats/token
``seq_kl``             T·KL: the per-row sum of log μ − log π_t, mean over rows
``max_abs_dp``         max over sampled tokens of |π_t(a) − μ(a)|
``update_k1/k3``       KL(π_{t−1}‖π_t) on a fresh batch sampled by π_{t−1} without friction (the
                       per-update KL; measured on fresh tokens, not the ones the update used)
``lag_k1/k3``          KL(π_{t−lag}‖π_t) likewise (the lag-KL; ``lag`` = 10 as the published values)
``error``              the learner's evaluation on fresh prompts (and ``eval_truncated``)
=====================  =========================================================================
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import Tensor
from tqdm.auto import tqdm

from sandbox.core.rollout import Rollout
from sandbox.core.seeding import derived_generator
from sandbox.diagnostics import token_entropy
from sandbox.estimators.base import masked_mean
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner
from sandbox.tasks.regime import RECIPE

TAIL = 1e-3  # μ(a) below this is the low-probability tail
LAG = 10

# ---------------------------------------------------------------------------------------------
# The controls' rules (issue 42, item 7), committed before the runs they judge.
#: negative control: by the last evaluation its error is at most this fraction of its warm-start error
#: (the upper end of the 95% t-interval over seeds of last − fraction·first is ≤ 0)
NEGATIVE_ERROR_FRACTION = 0.5
#: … its entropy stays at or above this (nats/token) and its zero-advantage share at or below this,
#: at every evaluation through ``CONTROL_HORIZON`` steps (median over the seeds of a run)
NEGATIVE_MIN_ENTROPY, NEGATIVE_MAX_ZERO_ADV = 0.05, 0.5
CONTROL_HORIZON = 1000
#: a seed collapses when it diverges, or when its error at the last evaluation exceeds its
#: warm-start error by at least ``COLLAPSE_MARGIN`` (it ends worse than it began)
COLLAPSE_MARGIN = 0.1
#: a positive control holds when at least this many of 8 seeds collapse
POSITIVE_MIN_COLLAPSED = 6


def collapsed(frame: pd.DataFrame) -> pd.Series:
    """Per member of a ``probe`` frame: whether it collapsed (``COLLAPSE_MARGIN``, divergence)."""
    ev = frame.dropna(subset=["error"]).sort_values("step")
    first = ev.groupby("member")["error"].first()
    last = ev.groupby("member")["error"].last()
    diverged = frame.groupby("member")["diverged"].any()
    return diverged | (last - first >= COLLAPSE_MARGIN)


def negative_control(frame: pd.DataFrame) -> dict[str, float | bool]:
    """The negative control's three conditions on a ``probe`` frame (module constants), with the
    numbers that decide them: mean first and last error, the upper end of the 95% t-interval of
    last − fraction·first, the lowest median entropy and the highest median zero-advantage share."""
    ev = frame.dropna(subset=["error"]).sort_values("step")
    first, last = ev.groupby("member")["error"].first(), ev.groupby("member")["error"].last()
    horizon = frame[frame["step"] <= CONTROL_HORIZON].dropna(subset=["entropy"])
    by_step = horizon.groupby("step")[["entropy", "zero_adv_frac"]].median()
    gap = (last - NEGATIVE_ERROR_FRACTION * first).to_numpy()
    upper = gap.mean() + stats.t.ppf(0.975, len(gap) - 1) * gap.std(ddof=1) / math.sqrt(len(gap)) if len(gap) > 1 else gap.mean()
    low_entropy, high_zero = float(by_step["entropy"].min()), float(by_step["zero_adv_frac"].max())
    return {"first_error": float(first.mean()), "last_error": float(last.mean()), "upper": float(upper),
            "min_entropy": low_entropy, "max_zero_adv": high_zero,
            "learns": bool(upper <= 0), "entropy": bool(low_entropy >= NEGATIVE_MIN_ENTROPY),
            "zero_adv": bool(high_zero <= NEGATIVE_MAX_ZERO_ADV)}


def negative_control_holds(frame: pd.DataFrame) -> dict[str, bool]:
    """The negative control's three conditions on a ``probe`` frame (``negative_control``)."""
    return {k: v for k, v in negative_control(frame).items() if isinstance(v, bool)}


def regime_config(**changes) -> RunConfig:
    """A ``RunConfig`` of the ``regime`` task with the published optimiser ``RECIPE``
    (``sandbox.tasks.regime``); ``changes`` override any field."""
    return RunConfig(**{"task": "regime", **RECIPE, **changes})


def _kl(log_mu: Tensor, log_pi: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """(k1, k3) of KL(μ‖π) per token from tokens sampled by μ, ``[S]``."""
    log_r = (log_pi - log_mu).double().masked_fill(~mask, 0.0)
    return masked_mean(-log_r, mask), masked_mean(torch.expm1(log_r) - log_r, mask)


def step_quantities(al: ActorLearner, rollout: Rollout) -> dict[str, Tensor]:
    """The every-step quantities of ``rollout`` that need no forward pass (module docstring), ``[S]``."""
    task, S, mask = al.task, al.population, rollout.mask
    rewards = rollout.rewards.reshape(S, -1, task.samples_per_prompt)
    eos = task.env.eos
    return {
        "reward": rollout.rewards.double().mean(-1),
        "zero_adv_frac": (rewards == rewards[..., :1]).all(-1).double().mean(-1),
        "truncated": (~(rollout.actions == eos).any(-1)).double().mean(-1),
        "length": mask.double().sum(-1).mean(-1),
        "tail_mass": masked_mean((rollout.behavior_logp.exp() < TAIL).double(), mask),
    }


def batch_quantities(al: ActorLearner, rollout: Rollout) -> dict[str, Tensor]:
    """The quantities of ``rollout`` against the learner now that need its forward pass: entropy,
    KL(μ‖π_t) (k1, k3), T·KL and max |π_t − μ| (module docstring), ``[S]``."""
    task, params, S, mask = al.task, [p.detach() for p in al.params], al.population, rollout.mask
    with torch.no_grad():
        log_pi = task.score(params, rollout, grad=False).logp
        logits = task.token_logits(params, rollout)
    log_mu, valid = rollout.behavior_logp, mask.double()
    k1, k3 = _kl(log_mu, log_pi, mask)
    return {
        "entropy": token_entropy(logits, mask),
        "mismatch_k1": k1, "mismatch_k3": k3,
        "seq_kl": ((log_mu - log_pi).double() * valid).sum(-1).mean(-1),
        "max_abs_dp": ((log_pi.exp() - log_mu.exp()).abs().double() * valid).reshape(S, -1).amax(-1),
    }


def lag_kl(al: ActorLearner, old: list[Tensor], step: int) -> tuple[Tensor, Tensor]:
    """KL(π_old‖π_t) on a fresh batch sampled by ``old`` without friction, (k1, k3) ``[S]``."""
    task, frictions = al.task, al.task.frictions
    task.attach_frictions(type(frictions)())  # the policy itself: no rounding, no delay
    try:
        rollout = collect(task, old, step, derived_generator(al.config.seed, "lag-probe", step), al.config.seed)
    finally:
        task.attach_frictions(frictions)
    with torch.no_grad():
        log_pi = task.score([p.detach() for p in al.params], rollout, grad=False).logp
    return _kl(rollout.behavior_logp, log_pi, rollout.mask)


def warm_mismatch(config: RunConfig, bits: float) -> tuple[float, float]:
    """(k1, k3) of KL(μ‖π) per token at the warm start, μ the sampler rounded to ``bits`` mantissa
    bits, on the first batch, averaged over the population."""
    friction = ("sampler_rounding", {"mantissa_bits": bits})
    al = ActorLearner(config.replace(frictions=(*config.frictions, friction), steps=1))
    q = batch_quantities(al, al.rollout(0))
    return float(q["mismatch_k1"].mean()), float(q["mismatch_k3"].mean())


def calibrate_bits(config: RunConfig, token_kl: float, start: float = 7.0, rounds: int = 3) -> tuple[float, float]:
    """The mantissa bits b whose k3 KL(μ‖π) at the warm start is ``token_kl``, and the KL measured
    there. A rounding error of relative size 2^−b gives KL ∝ 2^−2b, so each round moves b by
    ½·log₂(KL(b)/target) (a secant step on log KL, ``rounds`` times)."""
    bits, kl = start, math.nan
    for _ in range(rounds):
        kl = warm_mismatch(config, bits)[1]
        if not kl > 0:
            raise ValueError(f"the warm start shows no mismatch at {bits} bits (k3 = {kl})")
        bits = min(max(bits + 0.5 * math.log2(kl / token_kl), 1.0), 52.0)
    return bits, warm_mismatch(config, bits)[1]


def probe(config: RunConfig, every: int = 10, lag: int = LAG, progress: bool = True) -> pd.DataFrame:
    """Run ``config`` step by step and record the regime's quantities (module docstring): one row
    per (step, member); the every-``every`` columns are NaN at other steps."""
    al = ActorLearner(config)
    ring: collections.deque[list[Tensor]] = collections.deque(maxlen=lag + 1)
    rows = []
    for step in tqdm(range(config.steps + 1), desc=config.label or "regime", disable=not progress, leave=False):
        ring.append([p.detach().clone() for p in al.params])
        record: dict[str, Iterable] = {"step": np.full(al.population, step), "member": np.arange(al.population)}
        measure = step % every == 0 or step == config.steps
        if measure:
            ev = al.evaluate(step)
            record.update({"error": ev["error"].cpu().numpy(), "eval_truncated": ev["truncated"].cpu().numpy()})
            for name, k in (("update", 1), ("lag", lag)):
                if len(ring) > k:
                    k1, k3 = lag_kl(al, ring[-1 - k], step)
                    record.update({f"{name}_k1": k1.cpu().numpy(), f"{name}_k3": k3.cpu().numpy()})
        if step < config.steps:
            rollout = al.rollout(step)
            q = step_quantities(al, rollout)
            if measure:
                q.update(batch_quantities(al, rollout))
            metrics = al.update(step, rollout)
            q.update({k: metrics[k] for k in ("kl_k1", "kl_k3", "grad_norm") if k in metrics})
            record.update({k: v.detach().double().cpu().numpy() for k, v in q.items() if v is not None})
            al.publish(step + 1)
        rows.append(pd.DataFrame(record))
    frame = pd.concat(rows, ignore_index=True)
    frame["seed"], frame["label"] = config.seed, config.label
    frame["diverged"] = np.tile(al.diverged.cpu().numpy(), config.steps + 1)
    return frame


__all__ = ["COLLAPSE_MARGIN", "CONTROL_HORIZON", "LAG", "NEGATIVE_ERROR_FRACTION", "NEGATIVE_MAX_ZERO_ADV",
           "NEGATIVE_MIN_ENTROPY", "POSITIVE_MIN_COLLAPSED", "TAIL", "collapsed", "negative_control", "negative_control_holds", "batch_quantities", "calibrate_bits", "lag_kl", "probe", "regime_config", "step_quantities",
           "warm_mismatch"]
