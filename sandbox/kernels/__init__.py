"""Memory-lean log-probabilities of taken tokens under an LM head.

``fused_logprob(hidden, lm_head_weight, targets)`` returns logp_i = log_softmax(h_i Wᵀ)[t_i]
(optionally with the entropy H_i = −Σ_v p_iv log p_iv) without materialising the [N, V] logits;
``naive_logprob`` is the plain all-logits baseline it is tested and benchmarked against.
"""

from sandbox.kernels.fused import BACKENDS, fused_logprob
from sandbox.kernels.reference import naive_logprob

__all__ = ["BACKENDS", "fused_logprob", "naive_logprob"]
