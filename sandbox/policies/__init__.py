"""Policies in functional form over population parameters: the ``Policy`` protocol
(``sandbox.policies.base``) and its families (tabular, MLP, transformer, HF causal LMs), each
registered in ``POLICIES`` when this package is imported, so that a family is found by name
whichever task module (``sandbox.tasks.load_tasks``) a run imported."""

from sandbox.policies.base import POLICIES, Policy, PolicySample, Scored, register_policy
from sandbox.policies import mlp, tabular, transformer_policy  # noqa: F401  (the families register)
from sandbox.policies.hf import policy as causal_lm  # noqa: F401

__all__ = ["POLICIES", "Policy", "PolicySample", "Scored", "register_policy"]
