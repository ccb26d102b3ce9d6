"""Environments: bandits with exact gradients, contaminated MNIST, synthetic sequence tasks."""
