"""The numerics version: the hand-bumped back-up of the numeric fingerprints.

A stored result is valid while the code that would recompute it gives the same numbers. Every
result stores the fingerprints of the components its job built (``sandbox.jobs.fingerprints``:
hashes of seeded canary evaluations), and the store reuses it while they match: an edit that
changes a component's numbers invalidates that component's results by itself, and a refactor that
changes none keeps every result (and the committed paper-tier data) valid. ``NUMERICS`` is stored
beside them and must match too: bump it for a change of numbers no canary can see (a code path
selected by a numeric setting of a task or friction — an estimator's, baseline's and controller's
are covered by their path fingerprints — or a job function's own arithmetic outside the
components), and every result is recomputed. The golden runs (``tests/golden``: every task under staleness and each
friction, within the float32 tolerance of ``tests/golden/tolerance.py``) are the check that numbers
did not change; ``tests/golden/test_numerics.py``
records a hash of their values beside ``NUMERICS`` and fails when the golden data are re-frozen
without ``NUMERICS`` being bumped (say so in the commit).
"""

#: bump on a change of the numbers a job computes that no fingerprint catches (see the module docstring)
NUMERICS = 1

__all__ = ["NUMERICS"]
