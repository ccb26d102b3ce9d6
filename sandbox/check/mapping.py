"""From a configuration's keys to our fields: the mapping table.

A ``Schema`` is one source's data (``sandbox.check.verl``, ``sandbox.check.trl``): the keys read
with their defaults (from the source's own code, the version said in ``version``), the keys that
change nothing in the sandbox (and why), the keys it does not model (with the values under which
they are harmless), glob patterns of infrastructure keys (paths, parallelism, logging, optimiser:
not loss or friction settings), and ``derive``, which reads the settings and returns the recipe and
the deployment. Every key the config gives lands in exactly one of: a row of the table, the
ignored list (``--ignore KEY``), the infrastructure list — or a one-line refusal naming it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox.check.deployment import Deployment
from sandbox.check.readers import read_config
from sandbox.check.validate import Spec, blame, check_deployment, check_value, spec_of
from sandbox.scoring.recipes import Recipe, recipe_names

_OWN = object()  # Settings.map's default value: the key's own
#: --precision → the sampler dtype of precision_mismatch ('off': no mismatch cell)
PRECISIONS = {"bf16": "bfloat16", "fp16": "float16", "off": None}
#: estimators that correct the sampler/learner mismatch by themselves (besides any ``rollout_is`` field)
CORRECTING = ("tis", "mis", "rollout_rs")


@dataclass(frozen=True)
class Row:
    """One line of the mapping table: their key → our field → value (``note``: 'default' when the
    config does not set the key, or why a key changes nothing here)."""

    key: str
    field: str
    value: Any
    note: str = ""


@dataclass(frozen=True)
class Schema:
    source: str
    version: str  # what was read: project, commit, date
    defaults: dict[str, Any]  # every key ``derive`` reads, with the source's default
    inert: dict[str, str]  # keys that change nothing in the sandbox: why
    refused: dict[str, tuple[tuple, str]]  # key → (values under which it is harmless, what is not modelled)
    infrastructure: tuple[str, ...]  # fnmatch patterns: not loss or friction settings
    derive: Callable[[Settings], tuple[dict, Deployment]]
    specs: dict[str, Spec] = field(default_factory=dict)  # types/ranges beyond the defaults' types
    #: the config changes a user of this framework can make to its loss (sandbox.check.alternatives)
    alternatives: tuple[dict[str, Any], ...] = ()


class Settings:
    """The config's values over the schema's defaults; ``map``/``inert`` record the table's rows."""

    def __init__(self, flat: dict[str, Any], schema: Schema, every_key: Sequence[str] = ()):
        self.flat, self.schema, self.rows, self.warnings = flat, schema, [], []
        self.every_key = tuple(every_key) or tuple(flat)  # the file's keys, infrastructure and ignored included
        self.overrides: dict[str, Any] = {}  # a trainer's own defaults over the schema's (derive sets them)
        self.logs: list[str] = []  # the framework's metrics this run logs that an alarm reads (derive sets them)

    def __getitem__(self, key: str) -> Any:
        if key not in self.schema.defaults:
            raise KeyError(f"{self.schema.source} schema reads {key!r} without a default")  # a bug in the schema
        if key not in self.flat:
            return self.overrides.get(key, self.schema.defaults[key])
        value = self.flat[key]
        check_value(key, value, spec_of(self.schema.defaults[key], self.schema.specs.get(key)))
        return value

    def given(self, key: str) -> bool:
        return key in self.flat

    def map(self, key: str, target: str, value: Any = _OWN, note: str = "") -> Any:
        """Record ``key → target = value`` and return the value. ``value`` defaults to the key's
        own; a row may name several keys (``'a × b'``): the note says 'default' when the config
        sets none of them."""
        value = self[key] if value is _OWN else value
        keys = keys_of(key)
        default = "" if key.startswith("--") or any(self.given(k) for k in keys) else \
            "this trainer's default" if any(k in self.overrides for k in keys) else "default"
        self.rows.append(Row(key, target, value, "; ".join(n for n in (default, note) if n)))
        return value

    def warn(self, message: str) -> None:
        """A line the report prints above the table: the mapping is right but the run is unusual."""
        self.warnings.append(message)

    def covered(self, key: str) -> bool:
        return any(key in keys_of(r.key) for r in self.rows)

    def inert(self, key: str, why: str) -> None:
        if not self.covered(key):
            self.rows.append(Row(key, "—", self.flat.get(key, self.schema.defaults.get(key)), why))

    def refuse(self, key: str, why: str) -> None:
        """One line naming the key; ``--ignore`` is suggested only for a key the file sets (ignoring
        a default changes nothing), and ``map_config`` drops it where ignoring leads to the same refusal."""
        value = self.flat.get(key, self.overrides.get(key, self.schema.defaults.get(key)))
        hint = f"; pass --ignore {key} to check the rest without it" if self.given(key) else \
            f" (the {self.schema.version} default; set {key} in the config)"
        raise Refusal(f"{key}={value!r}: {why}", hint, key, self.given(key))


class Refusal(ValueError):
    """A key the mapping does not model at this value: ``why`` and ``hint`` (what to do), the key,
    whether the file sets it; ``warnings``: what the mapping had found before it (printed too)."""

    def __init__(self, why: str, hint: str = "", key: str = "", given: bool = False, warnings: Sequence[str] = ()):
        super().__init__(why + hint)
        self.why, self.hint, self.key, self.given, self.warnings = why, hint, key, given, tuple(warnings)


@dataclass(frozen=True)
class Mapping:
    """A configuration mapped: the recipe to score, the deployment its battery is built from, the
    table, the keys ignored on request and the infrastructure keys skipped."""

    source: str
    label: str
    version: str
    recipe: Recipe
    deployment: Deployment
    rows: tuple[Row, ...]
    ignored: tuple[str, ...] = ()
    infrastructure: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = ()
    logs: tuple[str, ...] | None = None  # the metrics an alarm reads that the run logs (None: not known)

    def table(self) -> list[tuple[str, str, str, str]]:
        return [(r.key, r.field, _show(r.value), r.note) for r in self.rows]

    def text(self) -> str:
        """The table as aligned text (what ``sandbox check`` prints first)."""
        head = ("their key", "our field", "value", "note")
        rows = [head] + self.table()
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"{self.source} config {self.label!r} read as {self.version}:"]
        lines += [f"  warning: {w}" for w in self.warnings]
        lines += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + ("  " + r[3] if r[3] else "")
                  for r in rows]
        if self.ignored:
            lines.append(f"  ignored on request (--ignore): {', '.join(self.ignored)}")
        if self.infrastructure:
            lines.append(f"  {len(self.infrastructure)} infrastructure key(s) (paths, parallelism, logging, "
                         "optimiser) are not loss or friction settings and were skipped")
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = ["| their key | our field | value | note |", "|---|---|---|---|"]
        lines += [f"| `{k}` | `{f}` | `{v}` | {n} |" for k, f, v, n in self.table()]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"source": self.source, "label": self.label, "version": self.version,
                "recipe": self.recipe.to_dict(), "deployment": asdict(self.deployment),
                "rows": [asdict(r) for r in self.rows], "ignored": list(self.ignored),
                "infrastructure": list(self.infrastructure), "warnings": list(self.warnings),
                "logs": None if self.logs is None else list(self.logs)}


def keys_of(name: str) -> list[str]:
    """The keys a row names: ``'a.b × c.d'`` → ``['a.b', 'c.d']``."""
    return re.findall(r"[A-Za-z_][\w.]*", name)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def map_config(config: Any, ignore: Sequence[str] = (), precision: str | None = None,
               label: str | None = None, framework: str | None = None, trainer: str | None = None) -> Mapping:
    """Read ``config`` (a verl YAML, a TRL GRPOConfig as YAML/JSON/object, or a dict) and map it:
    unknown keys and keys we do not model are one-line ``ValueError``s naming the key, unless in
    ``ignore``; ``precision`` ('bf16' or 'fp16') adds the sampler/learner precision mismatch, which
    a config that corrects for it (a rollout correction) gets at bf16 unless ``precision='off'``;
    ``framework`` ('verl==0.9.1', 'verl@b178a3c', 'trl==1.16.0'; default: the newest) is the
    version the config is read as, ``trainer`` the TRL trainer ('grpo' or 'async_grpo'; default: told
    by the keys) (``sandbox.check.frameworks``)."""
    from sandbox.check.frameworks import schema_for, trainer_of

    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    if isinstance(ignore, str) or not all(isinstance(k, str) for k in ignore):
        raise ValueError(f"ignore must be a list of keys, got {ignore!r}")
    source, flat, stem = read_config(config)
    schema = schema_for(source, framework, trainer_of(source, flat, stem, trainer))
    missing = [k for k in ignore if k not in flat]
    if missing:
        raise ValueError(f"--ignore {missing[0]}: the config does not set this key")
    ignored = tuple(k for k in flat if k in ignore)
    infra = tuple(k for k in flat if k not in ignore and _is_infrastructure(k, schema))
    kept = {k: v for k, v in flat.items() if k not in ignored and k not in infra}
    settings = Settings(kept, schema, tuple(flat))
    run, deployment = _derive(settings, kept, schema, _unmodelled(kept, schema, source, trainer_of(
        source, flat, stem, trainer)))
    if precision is not None and PRECISIONS[precision] is not None:
        deployment = deployment.replace(precision=settings.map("--precision", "precision_mismatch.sampler_dtype",
                                                               PRECISIONS[precision]))
    elif precision is None and (run["estimator_kwargs"].get("rollout_is") or run["estimator"] in CORRECTING):
        deployment = deployment.replace(precision=settings.map(
            "--precision", "precision_mismatch.sampler_dtype", "bfloat16",
            note="default: the config corrects a sampler/learner mismatch, so the check adds one (a bf16 sampler, "
                 "vLLM's usual dtype); --precision fp16 or off to change"))
    for key in kept:  # every key the config gives has its row
        if key in schema.inert:
            settings.inert(key, schema.inert[key])
        elif key in schema.refused:
            settings.inert(key, f"off at this value; when on, {schema.refused[key][1]}")
        else:
            settings.inert(key, "not read by the mapped loss and deployment")
    name = label or stem
    if name in recipe_names():  # a method's name in the tables is the config's alone
        name = f"{name} (config)"
    recipe = Recipe(name=name, **run)
    try:  # the same validation a RunConfig runs, restated under their key
        recipe.check()
        check_deployment(deployment)
    except ValueError as err:
        raise ValueError(blame(err, settings.rows)) from None
    return Mapping(source, name, schema.version, recipe, deployment, tuple(settings.rows), ignored, infra,
                   tuple(settings.warnings), tuple(settings.logs))


def _derive(settings: Settings, kept: dict[str, Any], schema: Schema,
            unmodelled: tuple[list[str], list[str]]) -> tuple[dict, Deployment]:
    """``schema.derive`` — then every refusal in one line: the keys the check does not know or
    does not model (dropped by ``--ignore``), and the first refusal ``derive`` met, whose
    ``--ignore`` hint is kept only where ignoring the key leads past it (its default is not refused
    too). The warnings found on the way travel with the refusal."""
    parts, keys = unmodelled
    try:
        result = schema.derive(settings)
    except Refusal as err:
        hint, (warnings, again) = err.hint, _past(err, kept, settings, schema)
        if again is not None and err.given and again.key == err.key:  # ignoring it: its default, refused too
            hint = (f"; set it to a value the check models (--ignore {err.key} would leave the "
                    f"{schema.version} default {again.why.split(': ', 1)[0].split('=', 1)[1]}, refused too)")
        settings.warnings[:] = list(dict.fromkeys([*settings.warnings, *warnings]))
        if not parts:
            raise Refusal(err.why, hint, err.key, err.given, settings.warnings) from None
        if hint == err.hint and err.given:  # one --ignore list for every key it helps
            parts, keys = [*parts, err.why], [*keys, err.key]
        else:
            parts = [*parts, err.why + hint]
        result = None
    if parts:
        many = len(keys) > 1
        raise Refusal("; ".join(parts), f"; pass --ignore {' '.join(keys)} to check the rest without "
                      f"{'them' if many else 'it'}" if keys else "", keys[0] if keys else "", True, settings.warnings)
    return result


def _past(err: Refusal, kept: dict[str, Any], settings: Settings,
          schema: Schema) -> tuple[list[str], Refusal | None]:
    """``derive`` again without the refused keys, one after another (at most 8): the warnings it
    finds for the rest of the config, and the refusal met right after dropping ``err.key`` (None
    if none)."""
    dropped, warnings, first = [err.key], [], None
    for _ in range(8):
        probe = Settings({k: v for k, v in kept.items() if k not in dropped}, schema, settings.every_key)
        try:
            schema.derive(probe)
        except Refusal as again:
            first = again if first is None and len(dropped) == 1 else first
            warnings += probe.warnings
            if again.key in dropped or not again.given:
                break
            dropped.append(again.key)
            continue
        except ValueError:
            pass
        warnings += probe.warnings
        break
    return warnings, first


def _unmodelled(kept: dict[str, Any], schema: Schema, source: str, trainer: str) -> tuple[list[str], list[str]]:
    """The refusal's parts for every key the check does not know (naming the version that has it,
    if another reading does) and every unmodelled key at a value that matters, and those keys."""
    from sandbox.check.frameworks import versions

    unknown = [k for k in kept if k not in schema.refused and k not in schema.defaults and k not in schema.inert]
    refused = [k for k in kept if k in schema.refused and not _harmless(kept[k], schema.refused[k][0])]
    parts = []
    elsewhere = {k: [v for v, other in versions(trainer)[source].items() if other is not schema and
                     (k in other.defaults or k in other.inert)] for k in unknown}
    for version in sorted({v for vs in elsewhere.values() for v in vs}):
        named = [k for k in unknown if version in elsewhere[k]]
        parts.append(f"{', '.join(named)}: not {schema.version} key(s) (Hydra refuses such an override) but "
                     f"{source} {version}'s: read it with --framework {source}@{version}")
    strange = [k for k in unknown if not elsewhere[k]]
    if strange:
        many = len(strange) > 1
        parts.append(f"{', '.join(strange)}: not {f'{len(strange)} ' if many else 'a '}{schema.source} "
                     f"setting{'s' if many else ''} the check knows (reading {schema.version})")
    parts += [f"{k}={kept[k]!r}: {schema.refused[k][1]}" for k in refused]
    return parts, unknown + refused


def _harmless(value: Any, harmless: tuple) -> bool:
    return any(value is h or (type(value) is type(h) and value == h) or
               (isinstance(value, (int, float)) and not isinstance(value, bool) and
                isinstance(h, (int, float)) and not isinstance(h, bool) and value == h) for h in harmless)


def _is_infrastructure(key: str, schema: Schema) -> bool:
    return key not in schema.defaults and key not in schema.inert and key not in schema.refused and any(
        fnmatch.fnmatchcase(key, pattern) for pattern in schema.infrastructure)
