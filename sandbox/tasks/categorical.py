"""Contextual categorical tasks: a context in, one of K actions out — a contextual environment
(``sandbox.envs.contextual``: the bandits, contaminated MNIST) × a categorical policy
(``sandbox.policies.categorical``: tabular, MLP) × the objective of ``mode`` (sampled, or exact
enumeration of every action), composed by the generic ``Task``.

What the family adds is a diagnostics hook, ``sandbox.oracles.OracleCosines``: the cosines of the
update to the batch's exact PG and CE oracles. A task of the family is a dataclass of knobs whose
``__post_init__`` calls ``compose`` (``sandbox.tasks.bandits``, ``sandbox.tasks.mnist``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sandbox.core.validation import check_choice
from sandbox.envs.contextual import ContextualEnv, ContextualEnvironment
from sandbox.objectives import MODES
from sandbox.oracles import OracleCosines
from sandbox.policies.base import Policy
from sandbox.tasks.base import Task
from sandbox.tasks.compose import choose_objective, choose_policy, chosen


def compose(task: Task, env: ContextualEnv, own: str, build_own: Callable[[], Policy], probes: Sequence[str] = (),
            probe_advantage: str | None = None, reference_estimators: Sequence[str] = ()) -> None:
    """Give ``task`` (whose knobs ``batch_size``, ``samples_per_context``, ``mode``, ``policy``,
    ``policy_kwargs`` and ``objective`` are set) its contextual environment, the policy its ``policy``
    key names (its ``own`` family from ``build_own``, else from ``env.spec``: ``sandbox.tasks.compose``),
    the objective of ``objective``/``mode`` and the oracle-cosine diagnostics (``probes`` and
    ``reference_estimators``: estimator names, ``sandbox.oracles``); ``task.env`` is the contextual
    problem itself."""
    check_choice("mode", task.mode, tuple(MODES))
    objective = chosen("objective", task.objective, "plain", "mode", "exact" if task.mode == "exact" else "plain",
                       "plain")
    task.env = env
    task.policy = choose_policy(task, task.policy, env.spec, own, build_own)
    task.objective = choose_objective(task, objective, env.spec, task.policy)
    task.environment = ContextualEnvironment(env, task.batch_size, task.samples_per_context, task.objective.enumerates)
    task.diagnostics = OracleCosines(tuple(probes), probe_advantage, tuple(reference_estimators))


__all__ = ["compose"]
