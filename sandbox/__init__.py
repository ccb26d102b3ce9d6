"""Policy-gradient estimators under distributed-RL frictions: a simulation and theory-validation sandbox."""

import gc
import os

# Our steps are many small kernels: OpenMP threads that spin while waiting make a step several
# times slower on a shared or busy machine (measured: 45 → 202 ms per sequence-task step with two
# threads next to other work; 31 ms with passive waiting). libgomp reads this when torch loads, so it
# is set before the first torch import; an explicit setting in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Importing torch and the registries makes ≈ 175,000 tracked objects, none garbage; the cyclic collector,
# triggered by the growing heap, would traverse them again and again (≈ 0.15–0.2 CPU-s, a tenth of a
# run's start-up; measured in benchmarks/results/startup.md). Paused while they load, resumed after.
_collecting = gc.isenabled()
gc.disable()
try:
    from sandbox.estimators import (  # noqa: E402
        ESTIMATORS,
        Estimator,
        EstimatorOutput,
        PGTerms,
        TokenLoss,
        make_estimator,
        register_estimator,
    )

    import sandbox.methods  # noqa: E402,F401 — the recipes' names reserved before any plugin registers (one rule for names)
finally:
    if _collecting:
        gc.enable()

__version__ = "0.1.0"


def __getattr__(name: str):
    """``sandbox.score`` and ``sandbox.check`` are imported on first use (they pull in the runtime
    and pandas); ``sandbox.check`` is a callable module: ``sandbox.check("run.yaml")``."""
    if name == "score":
        from sandbox.scoring import score

        return score
    if name == "check":
        import sandbox.check as check

        return check
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")


__all__ = [
    "ESTIMATORS",
    "Estimator",
    "EstimatorOutput",
    "PGTerms",
    "TokenLoss",
    "check",
    "make_estimator",
    "register_estimator",
    "score",
]
