"""Any ``transformers`` causal LM as a policy: models (``model``), KV-cached sampling through the
actor's chain (``sampling``) and teacher-forced log-probs through the fused kernel (``logprob``).
The ``hf_text`` task that trains one is ``sandbox.tasks.hf_text``."""

from sandbox.policies.hf.logprob import LOGPROB_METHODS, CausalLMPolicy, completion_logp
from sandbox.policies.hf.model import (
    ARCHS,
    DTYPES,
    backbone,
    check_fusable,
    head_parameter_name,
    load_causal_lm,
    tiny_causal_lm,
)
from sandbox.policies.hf.sampling import Completions, sample_completions, token_mask

__all__ = ["ARCHS", "DTYPES", "LOGPROB_METHODS", "CausalLMPolicy", "Completions", "backbone", "check_fusable",
           "completion_logp", "head_parameter_name", "load_causal_lm", "sample_completions", "tiny_causal_lm",
           "token_mask"]
