"""The actor-learner runtime: actor, learner, the training loop, parameter history, optimisers, and
the same loop on Ray (``ray_async``). Running many trainings as resumable jobs is ``sandbox.jobs``."""
