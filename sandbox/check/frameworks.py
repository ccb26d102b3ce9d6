"""``--framework``: which framework version a configuration is read as — one version per reading.

``verl==0.9.1``, ``verl@b178a3c``, ``trl==1.16.0`` (or the name alone: its default, the newest
version tests/conformance runs). Every default, mapping row and refusal of a reading belongs to
that version; the report's header names it.
"""

from __future__ import annotations

import re

_SPEC = re.compile(r"^(?P<name>[a-z]+)(?:(?:==|@)(?P<version>[\w.]+))?$")


#: TRL's trainers (``--trainer``): GRPOConfig/GRPOTrainer or the experimental AsyncGRPOConfig/AsyncGRPOTrainer
TRAINERS = ("grpo", "async_grpo")


def versions(trainer: str = "grpo") -> dict[str, dict]:
    """``{framework: {version: Schema}}``, each framework's default first (TRL's for ``trainer``)."""
    from sandbox.check import VERSIONS

    return {"verl": VERSIONS["verl"], "trl": VERSIONS["trl/async_grpo" if trainer == "async_grpo" else "trl"]}


def trainer_of(source: str, flat: dict, label: str, trainer: str | None) -> str:
    """The TRL trainer a config is for: ``trainer`` when given, else 'async_grpo' for an
    ``AsyncGRPOConfig`` object or a key only it has, else 'grpo'. verl's trainer is told by its keys."""
    from sandbox.check import ASYNC_GRPO_MARKERS as MARKERS

    if trainer is not None and trainer not in TRAINERS:
        raise ValueError(f"--trainer must be one of {list(TRAINERS)}, got {trainer!r}")
    if source != "trl":
        if trainer is not None:
            raise ValueError(f"--trainer {trainer}: it chooses a TRL trainer; a verl config's trainer is told by its "
                             "keys (async_training: fully-async; a top-level rollout section: one-step-off)")
        return "ppo"
    async_keys = [k for k in flat if k in MARKERS]
    if trainer == "grpo" and async_keys:
        raise ValueError(f"--trainer grpo: {async_keys[0]} is an AsyncGRPOConfig key (use --trainer async_grpo)")
    return trainer or ("async_grpo" if async_keys or label == "AsyncGRPOConfig" else "grpo")


def choices() -> list[str]:
    return [f"{name}{'@' if re.fullmatch(r'[0-9a-f]{7,40}', v) else '=='}{v}"
            for name, table in versions().items() for v in table]


def schema_for(source: str, framework: str | None, trainer: str = "grpo"):
    """The schema of ``source`` ('verl' or 'trl', told by the config's keys) at the version
    ``framework`` names (None: the default); a spec of another framework or an unknown version is
    one ``ValueError`` line."""
    table = versions(trainer)[source]
    if framework is None:
        return next(iter(table.values()))
    match = _SPEC.match(str(framework).strip())
    if match is None or match["name"] not in versions():
        raise ValueError(f"--framework must be one of {choices()} (or a name alone for its default), got {framework!r}")
    if match["name"] != source:
        raise ValueError(f"--framework {framework}: the config is a {source} config (told by its keys), "
                         f"not {match['name']}")
    version = match["version"]
    if version is None:
        return next(iter(table.values()))
    found = [v for v in table if v == version or (len(version) >= 7 and v.startswith(version))]
    if not found:
        raise ValueError(f"--framework {framework}: the check reads {source} as {', '.join(table)} "
                         f"(the versions whose code and configs were read); got {version!r}")
    return table[found[0]]
