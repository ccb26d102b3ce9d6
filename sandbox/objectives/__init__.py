"""Objectives: the loss the learner differentiates, from an estimator and a rollout's ``PGTerms``.

Three, chosen by the run config (the task's knobs ``mode`` and ``backward``): ``PLAIN``
(``estimator(terms)``), ``ExactExpectation`` (``mode='exact'``: every action enumerated with
weight μ/n, the exact expected update) and ``ScreenedBackward`` (``backward='screened'``: Kondo's
backward pass on the kept rows only). The learner (``sandbox.runtime.learner``) makes the call.
"""

from sandbox.objectives.base import PLAIN, Objective, Plain
from sandbox.objectives.exact import (
    EXACT,
    MODES,
    ExactExpectation,
    enumerated_terms,
    expected_objective,
    expected_update,
)
from sandbox.objectives.screened import ScreenedBackward, screened_objective

__all__ = ["EXACT", "MODES", "PLAIN", "ExactExpectation", "Objective", "Plain", "ScreenedBackward", "enumerated_terms",
           "expected_objective", "expected_update", "screened_objective"]
