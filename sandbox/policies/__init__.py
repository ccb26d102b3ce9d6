"""Policies in functional form over population parameters: the ``Policy`` protocol
(``sandbox.policies.base``) and its families (tabular, MLP, transformer, HF causal LMs)."""

from sandbox.policies.base import POLICIES, Policy, PolicySample, Scored, register_policy

__all__ = ["POLICIES", "Policy", "PolicySample", "Scored", "register_policy"]
