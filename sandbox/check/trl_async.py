"""TRL's ``AsyncGRPOConfig`` (``trl.experimental.async_grpo``): its keys, defaults and mapping.

Read at TRL 1.16.0: ``async_grpo_config.py`` (its fields and defaults), ``async_grpo_trainer.py``
(``compute_loss``: PPO-clip ``min(r·A, clip(r, 1 − ε, 1 + ε_high)·A)`` with r = π_θ/π_old and
π_old the log-probs the vLLM server returned with the sample — no recomputation —, summed over
tokens and divided by the batch's tokens: token-mean; a sample more than ``max_staleness`` weight
versions behind is dropped) and ``async_rollout_worker.py`` (A = (R − mean)/(std + 1e-8) per group
with numpy's population std). The rollout server is ``trl vllm-serve`` with
``--logprobs-mode processed_logprobs`` (``trl/generation/vllm_client.py``): the truncated
distribution's log-probs under top-p/top-k.
"""

from __future__ import annotations

from sandbox.check import trl
from sandbox.check.deployment import Deployment
from sandbox.check.mapping import Schema, Settings
from sandbox.check.validate import Spec
from sandbox.estimators.trl_metrics import ASYNC_METRICS

#: keys only AsyncGRPOConfig has at 1.16.0, not GRPOConfig (any one tells it; tests/conformance/test_versions.py)
MARKERS = ("max_staleness", "max_inflight_tasks", "weight_sync_steps", "queue_maxsize", "token_budget",
           "fork_threshold_tokens", "heartbeat_stale_after_s", "weight_sync_timeout", "request_timeout")
DEFAULTS = {"epsilon": 0.2, "epsilon_high": None, "num_generations": 8, "top_p": 1.0, "top_k": 0, "max_staleness": 4,
            "weight_sync_steps": 1}
INERT = {
    "temperature": trl.INERT["temperature"],
    "max_completion_length": "the sandbox's answers have a fixed length",
    "per_device_train_batch_size": "samples per optimiser step: one update per batch, as the sandbox's learner",
    "gradient_accumulation_steps": "samples per optimiser step: one update per batch, as the sandbox's learner",
}
REFUSED = {"min_p": trl.REFUSED["min_p"], "repetition_penalty": trl.REFUSED["repetition_penalty"],
           "use_liger_kernel": ((False,), "Liger's fused loss was not run beside ours")}
INFRASTRUCTURE = trl.INFRASTRUCTURE + (
    "fork_threshold_tokens", "request_timeout", "weight_sync_timeout", "token_budget", "max_inflight_tasks",
    "queue_maxsize", "heartbeat_stale_after_s", "log_completions", "vllm_server_base_url", "vllm_server_timeout")
VERSION = "TRL 1.16.0 (AsyncGRPOConfig, experimental AsyncGRPOTrainer)"


def derive(s: Settings) -> tuple[dict, Deployment]:
    s.map("(AsyncGRPOTrainer.compute_loss)", "estimator", "ppo", note="PPO-clip, no dual clip")
    low = s.map("epsilon", "ppo.eps_low")
    high = s.map("epsilon_high", "ppo.eps_high", low, note="epsilon_high is None") if s["epsilon_high"] is None \
        else s.map("epsilon_high", "ppo.eps_high")
    kwargs = {"eps_low": low, "eps_high": high, "dual_clip": None,
              "aggregation": s.map("(AsyncGRPOTrainer.compute_loss)", "ppo.aggregation", "token-mean",
                                   note="summed over tokens, divided by the batch's tokens"),
              "trl_metrics": s.map("(AsyncGRPOTrainer.compute_loss)", "ppo.trl_metrics", "async_grpo",
                                   note="the run logs its ratio and kl as TRL 1.16.0 computes them: π_θ against "
                                        "vLLM's μ; TRL sets no alarm on them")}
    s.logs += list(ASYNC_METRICS)
    s.map("(async_rollout_worker)", "advantage", "grpo", note="(R − mean)/(std + 1e-8) per group")
    adv = {"eps": s.map("(async_rollout_worker)", "advantage_kwargs.eps", 1e-8, note="TRL's")}
    group = s.map("num_generations", "deployment.group")
    s.warn(f"AsyncGRPO divides by the group's population std, ours by the unbiased one: its advantages are ours × "
           f"√(n/(n−1)) = {(group / (group - 1)) ** 0.5:.3f} at n = {group} (a step-size difference)")
    lag = s["max_staleness"] * s["weight_sync_steps"]
    delay = s.map("max_staleness × weight_sync_steps", "deployment.delay",
                  {"kind": "uniform", "D": lag} if lag > 0 else {},
                  note="samples up to max_staleness weight versions old, weights synced every weight_sync_steps "
                       "updates; uniform over 0..D is our reading (the real lags follow generation speed)")
    deployment = Deployment(group=group, top_p=float(s.map("top_p", "deployment.top_p")),
                            top_k=s.map("top_k", "deployment.top_k"),
                            report=s.map("(trl vllm-serve)", "deployment.report", "truncated",
                                         note="--logprobs-mode processed_logprobs: the truncated distribution's"),
                            reuse=1, delay=delay,
                            proximal=s.map("(AsyncGRPOTrainer old_log_probs)", "deployment.proximal", "behavior",
                                           note="π_old = the vLLM log-probs of the sample (μ), not recomputed"))
    return {"estimator": "ppo", "estimator_kwargs": kwargs, "advantage": "grpo", "advantage_kwargs": adv}, deployment


SPECS = {"num_generations": Spec("int", low=2), "top_p": Spec("number", low=0.0, high=1.0, low_open=True),
         "top_k": Spec("int", low=0), "epsilon": Spec("number", low=0.0),
         "epsilon_high": Spec("number", low=0.0, none=True, finite=False), "max_staleness": Spec("int", low=0),
         "weight_sync_steps": Spec("int", low=1)}
SCHEMA = Schema("trl", VERSION, DEFAULTS, INERT, REFUSED, INFRASTRUCTURE, derive, SPECS)
VERSIONS = {"1.16.0": SCHEMA}
