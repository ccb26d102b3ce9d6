"""The numerics version: what a stored result's numbers depend on, as opposed to the code's layout.

A stored result is valid while the code that would recompute it gives the same numbers. The store
(``sandbox.jobs.store``) keeps a result whose sandbox modules are byte-for-byte unchanged, or
whose ``NUMERICS`` equals this one: a refactor that moves code without changing a number keeps
every stored result (and the committed paper-tier data) valid. The golden runs (``tests/golden``:
every task under staleness and each friction, bit for bit) are the check that numbers did not
change; ``tests/golden/test_numerics.py`` records a hash of their values beside ``NUMERICS`` and
fails when the golden data are re-frozen without ``NUMERICS`` being bumped. Bump it whenever a
change alters any number a job computes, golden-covered or not (say so in the commit).
"""

#: bump on any change of the numbers a job computes (see the module docstring)
NUMERICS = 1

__all__ = ["NUMERICS"]
