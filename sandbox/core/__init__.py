"""The bottom layer: registries, plugins and entry points, validation, seeding and the contracts
every other layer shares (``Rollout`` from the actor to the learner, ``PGTerms`` and
``EstimatorOutput`` around an estimator), and process lifecycle (``processes``: a local Ray that
dies with its driver, which both the Ray runtime and the jobs above it start). It imports nothing
from the rest of the package."""

from sandbox.core.registry import Registry
from sandbox.core.rollout import Rollout
from sandbox.core.seeding import derived_generator
from sandbox.core.terms import EstimatorOutput, PGTerms, TokenLoss

__all__ = ["EstimatorOutput", "PGTerms", "Registry", "Rollout", "TokenLoss", "derived_generator"]
