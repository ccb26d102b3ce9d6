"""Every estimator of shared/spec/estimators.md behind one registry and one contract.

``make_estimator(name, **hyperparameters)`` builds one; ``ESTIMATORS.names()`` lists them.
"""

from sandbox.estimators import delight, importance, policy_gradient, trust_region  # noqa: F401  (registers)
from sandbox.estimators.base import (
    AGGREGATIONS,
    ESTIMATORS,
    Estimator,
    EstimatorOutput,
    PGTerms,
    TokenLoss,
    aggregate,
    make_estimator,
    register_estimator,
)
from sandbox.estimators.delight import Delight, Kondo, ProbabilityGate
from sandbox.estimators.importance import M2PO, ImportanceSampledPG, MaskedIS, TruncatedIS, VTracePG
from sandbox.estimators.policy_gradient import AdvantageWeightedRegression, CrossEntropy, Reinforce
from sandbox.estimators.trust_region import CISPO, GSPO, OPSM, PMPO, PPO, SAPO, DecoupledPPO

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "CISPO",
    "GSPO",
    "M2PO",
    "OPSM",
    "PMPO",
    "PPO",
    "ProbabilityGate",
    "SAPO",
    "AdvantageWeightedRegression",
    "CrossEntropy",
    "DecoupledPPO",
    "Delight",
    "Estimator",
    "EstimatorOutput",
    "ImportanceSampledPG",
    "Kondo",
    "MaskedIS",
    "PGTerms",
    "Reinforce",
    "TokenLoss",
    "TruncatedIS",
    "VTracePG",
    "aggregate",
    "make_estimator",
    "register_estimator",
]
