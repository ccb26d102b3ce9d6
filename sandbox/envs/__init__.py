"""Environments: bandits with exact gradients, contaminated MNIST, synthetic sequence tasks, text
problems — each family behind the ``Environment`` protocol (``sandbox.envs.base``)."""

from sandbox.envs.base import Batch, Contexts, Environment, Prompts, TextPrompts

__all__ = ["Batch", "Contexts", "Environment", "Prompts", "TextPrompts"]
