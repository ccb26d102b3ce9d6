"""Objectives: the loss the learner differentiates, from an estimator and a rollout's ``PGTerms``.

Three, registered by name (``OBJECTIVES``) and chosen by a task's ``objective`` key (or its older
knobs ``mode`` and ``backward``): ``PLAIN``
(``estimator(terms)``), ``ExactExpectation`` (``mode='exact'``: every action enumerated with
weight μ/n, the exact expected update) and ``ScreenedBackward`` (``backward='screened'``: Kondo's
backward pass on the kept rows only). The learner (``sandbox.runtime.learner``) makes the call.
"""

from sandbox.objectives.base import OBJECTIVES, PLAIN, Objective, Plain, make_objective
from sandbox.objectives.exact import (
    EXACT,
    MODES,
    ExactExpectation,
    enumerated_terms,
    expected_objective,
    expected_update,
)
from sandbox.objectives.screened import ScreenedBackward, screened_objective

__all__ = ["EXACT", "MODES", "OBJECTIVES", "PLAIN", "ExactExpectation", "Objective", "Plain", "ScreenedBackward",
           "enumerated_terms", "expected_objective", "expected_update", "make_objective", "screened_objective"]
