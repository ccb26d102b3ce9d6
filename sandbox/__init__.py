"""Policy-gradient estimators under distributed-RL frictions: a simulation and theory-validation sandbox."""

from sandbox.estimators import (
    ESTIMATORS,
    Estimator,
    EstimatorOutput,
    PGTerms,
    TokenLoss,
    make_estimator,
    register_estimator,
)

__version__ = "0.1.0"

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "EstimatorOutput",
    "PGTerms",
    "TokenLoss",
    "make_estimator",
    "register_estimator",
]
