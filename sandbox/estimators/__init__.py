"""Every estimator of shared/spec/estimators.md behind one registry and one contract.

``make_estimator(name, **hyperparameters)`` builds one; ``ESTIMATORS.names()`` lists them.
"""

from sandbox.estimators import (  # noqa: F401  (registers)
    covariance,
    delight,
    importance,
    masked,
    policy_gradient,
    sequence,
    target,
    trust_region,
)
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
from sandbox.estimators.covariance import ClipCov, KLCov
from sandbox.estimators.delight import Delight, Kondo
from sandbox.estimators.importance import M2PO, ImportanceSampledPG, MaskedIS, TruncatedIS, VTracePG
from sandbox.estimators.masked import DPPO, SAT, RolloutRejection, TwoSidedPPO
from sandbox.estimators.policy_gradient import AdvantageWeightedRegression, CrossEntropy, Reinforce
from sandbox.estimators.sequence import GMPO, LUSPO, VESPO, GSPOToken
from sandbox.estimators.target import TOPR, TPO
from sandbox.estimators.trust_region import CISPO, GSPO, OPSM, PMPO, PPO, SAPO, DecoupledPPO

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "CISPO",
    "DPPO",
    "GMPO",
    "GSPO",
    "GSPOToken",
    "LUSPO",
    "M2PO",
    "OPSM",
    "PMPO",
    "PPO",
    "SAPO",
    "SAT",
    "TOPR",
    "TPO",
    "VESPO",
    "AdvantageWeightedRegression",
    "ClipCov",
    "CrossEntropy",
    "DecoupledPPO",
    "Delight",
    "Estimator",
    "EstimatorOutput",
    "ImportanceSampledPG",
    "KLCov",
    "Kondo",
    "MaskedIS",
    "PGTerms",
    "Reinforce",
    "RolloutRejection",
    "TokenLoss",
    "TruncatedIS",
    "TwoSidedPPO",
    "VTracePG",
    "aggregate",
    "make_estimator",
    "register_estimator",
]
