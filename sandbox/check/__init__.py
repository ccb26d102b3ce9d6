"""``sandbox check``: a verl or TRL configuration mapped onto our fields and scored on its own
deployment's frictions (docs/check.md).

- ``readers``: the config files (verl YAML, nested or dotted; TRL GRPOConfig as YAML/JSON or the
  object) to flat dotted keys;
- ``verl``, ``trl``: each source's keys, defaults and mapping rules (data, plus one ``derive``);
- ``mapping``: the table (their key → our field → value), refusals and ``--ignore``;
- ``deployment``: the frictions read from the config and the deployment battery built from them;
- ``verdict``: the verdict and ``check.md|png|json``; ``api``: ``check(config)``.

``sandbox.check`` is this package and, called, ``check``: ``sandbox.check("run.yaml")``.
"""

import sys
import types

from sandbox.check import trl, trl_async, verl

SCHEMAS = {"verl": verl.SCHEMA, "trl": trl.SCHEMA}
#: every reading ``--framework`` and ``--trainer`` choose (sandbox.check.frameworks), defaults first
VERSIONS = {"verl": verl.VERSIONS, "trl": trl.VERSIONS, "trl/async_grpo": trl_async.VERSIONS}
ASYNC_GRPO_MARKERS = trl_async.MARKERS

from sandbox.check.api import CheckReport, check, prepare  # noqa: E402
from sandbox.check.deployment import Deployment, deployment_battery  # noqa: E402
from sandbox.check.mapping import Mapping, Row, map_config  # noqa: E402
from sandbox.check.readers import read_config  # noqa: E402


class _CallableModule(types.ModuleType):
    """``sandbox.check(config)`` whether ``sandbox.check`` names the package or the function."""

    def __call__(self, *args, **kwargs) -> CheckReport:
        return check(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["ASYNC_GRPO_MARKERS", "SCHEMAS", "VERSIONS", "CheckReport", "Deployment", "Mapping", "Row", "check", "deployment_battery", "map_config",
           "prepare", "read_config"]
