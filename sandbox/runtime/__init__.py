"""The actor-learner runtime: the training loop, parameter history, optimisers, sweeps."""
