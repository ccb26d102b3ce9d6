"""The command line's checked arguments: argparse types, paths checked before any work, plugins,
``--config``/``--set`` into a RunConfig. Each failure is one ``ValueError`` (or argparse) line that
names the option and what is valid."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
from pathlib import Path

from sandbox.core.validation import TooDeep, check_nesting, unique_pairs


def int_at_least(low: int):
    """An argparse type: an integer ≥ ``low`` (argparse names the option in its message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {low}, got {value}")
        return value

    return parse


class LazyChoices:
    """argparse ``choices`` read from ``load()`` on first use, so that building the parser imports
    nothing heavy (give the option a ``metavar``: argparse then reads the choices only for help and
    errors)."""

    def __init__(self, load) -> None:
        self._load, self._values = load, None

    def _get(self) -> list:
        if self._values is None:
            self._values = list(self._load())
        return self._values

    def __contains__(self, value) -> bool:
        return value in self._get()

    def __iter__(self):
        return iter(self._get())


def writable_file(path: str, option: str) -> Path:
    """Check, before any work, that ``path`` can be written (its folder exists and is writable)."""
    check_path_given(path, option)
    target = Path(path)
    folder = target.parent.resolve()
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a folder; give a file name (e.g. {target / 'run.parquet'})")
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{option} {path}: folder {folder} is not writable")
    return target


#: what ``sandbox run --out`` writes, by the file's suffix
METRICS_FORMATS = (".parquet", ".csv")


def metrics_file(path: str, option: str = "--out") -> Path:
    """A writable file for ``sandbox run``'s metrics, named ``.parquet`` or ``.csv`` (its format)."""
    target = writable_file(path, option)
    if target.suffix.lower() not in METRICS_FORMATS:
        raise ValueError(f"{option} {path}: the file's suffix says its format; give one of "
                         f"{', '.join(METRICS_FORMATS)} (e.g. {target.with_suffix('.parquet').name})")
    return target


def writable_dir(path: str, option: str) -> Path:
    """Check, before any work, that the folder ``path`` is (or can be made) writable."""
    from sandbox.core.validation import check_writable_dir

    check_path_given(path, option)
    return check_writable_dir(path, option)


def check_path_given(path: str, option: str) -> None:
    """An empty path would mean the current folder: refuse it rather than write there."""
    if not str(path).strip():
        raise ValueError(f"{option} is empty; give a path (an empty one would write into the current folder)")


def check_run_options(args: argparse.Namespace) -> None:
    """``--workers`` within its range for ``--backend``, and ``--ray-address`` only with ``--backend ray``
    (it would be ignored otherwise): before any work."""
    from sandbox.jobs.sweep import check_workers

    check_workers(args.workers, args.backend, "--workers")
    if args.ray_address and args.backend != "ray":
        raise ValueError("--ray-address needs --backend ray (without it the address would be ignored)")


def load_plugin(module: str) -> None:
    """Import a user module by dotted name or by path to a ``.py`` file (``import_plugins``, the
    same path every worker and notebook kernel takes: ``$SANDBOX_PLUGINS`` lists it for them); any
    failure is one line naming ``--plugin``."""
    from sandbox.core.plugins import PLUGINS_ENV, PluginError, import_plugins, plugins_from_env

    try:
        import_plugins([module])
    except PluginError as err:  # "plugin module … cannot be imported", "plugin file … does not exist"
        raise ValueError(f"--{err}") from None
    except SyntaxError as err:
        raise ValueError(f"--plugin {module!r}: SyntaxError in {err.filename}, line {err.lineno}: {err.msg}") from None
    except Exception as err:  # a plugin is user code: name its error, no traceback
        raise ValueError(f"--plugin {module!r} failed to load: {type(err).__name__}: {err}") from None
    spec = str(Path(module).resolve()) if module.endswith(".py") else module
    os.environ[PLUGINS_ENV] = os.pathsep.join(dict.fromkeys([*plugins_from_env(), spec]))


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (``json`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    return unique_pairs(pairs, lambda key: DuplicateKey(f"key {key!r} appears twice in one object; give it once"))


def loads(text: str):
    """``json.loads`` that refuses a key given twice in one object (``DuplicateKey``) and a document
    nested too deeply for the parser (``TooDeep``)."""
    check_nesting(text)
    return json.loads(text, object_pairs_hook=_unique_keys)


def parse_value(text: str):
    """A ``--set key=value`` value: JSON when it parses (numbers, lists, objects), else the string."""
    try:
        return loads(text)
    except (DuplicateKey, TooDeep) as err:
        raise ValueError(f"--set {text}: {err}") from None
    except json.JSONDecodeError:
        return text


def read_config_file(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--config {path}: no such file (expected a JSON object of RunConfig fields)")
    try:
        data = loads(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"--config {path}: not UTF-8 text (byte {err.start} is {err.object[err.start]:#04x}); "
                         "expected a JSON object of RunConfig fields") from None
    except (DuplicateKey, TooDeep) as err:
        raise ValueError(f"--config {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {path}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a JSON object of RunConfig fields, got {type(data).__name__}")
    return data


def config_from_args(args: argparse.Namespace):
    """A RunConfig from ``--config FILE.json`` and ``--set key=value`` overrides (dotted keys
    reach into dict fields, e.g. ``task_kwargs.K=10``; values are parsed as JSON when possible, but a
    field that holds a string takes the text as it is: ``--set label=123`` is the label '123')."""
    from sandbox.runtime.config import RunConfig

    base = read_config_file(args.config) if args.config else {}
    sets = []
    for item in args.set or []:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        sets.append((item, parents, leaf, value))
    first = _apply(base, sets, lambda parents, leaf, value: parse_value(value))  # which task, estimator … is set
    # again, in the order given (a later --set wins, a whole object or one of its keys alike), each value
    # parsed for the field it sets now that the task, estimator … are known
    return RunConfig.from_dict(_apply(base, sets, lambda parents, leaf, value: set_value(_owner(parents, first),
                                                                                         leaf, value)))


def _apply(base: dict, sets: list, value_of) -> dict:
    """``base`` (a deep copy) with every ``--set`` applied in order."""
    data = copy.deepcopy(base)
    for item, parents, leaf, value in sets:
        target = data
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ValueError(f"--set {item}: {parent} is not a dict field")
        target[leaf] = value_of(parents, leaf, value)
    return data


def _owner(parents: list[str], data: dict):
    """The dataclass whose field ``--set parents….leaf`` sets (None where unknown)."""
    from sandbox.runtime.config import RunConfig

    if not parents:
        return RunConfig
    if len(parents) > 1:
        return None
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    field_of = {"task_kwargs": "task", "estimator_kwargs": "estimator", "advantage_kwargs": "advantage"}
    if parents[0] == "staleness":
        from sandbox.frictions import DelaySchedule

        return DelaySchedule
    name = field_of.get(parents[0])
    entry = data.get(name, defaults.get(name)) if name else None
    registry = _registry(name, entry)
    return registry.get(entry) if registry is not None and isinstance(entry, str) and entry in registry else None


def _registry(name: str | None, entry):
    """The registry of the RunConfig field ``name`` (None for another field); the tasks' entry
    points are read only when ``entry`` is a task not registered yet (a plugin's may be)."""
    from sandbox.advantages import ADVANTAGES
    from sandbox.estimators import ESTIMATORS
    from sandbox.tasks import TASKS, load_tasks

    if name == "task" and isinstance(entry, str) and entry not in TASKS:
        load_tasks(entry)
    return {"task": TASKS, "estimator": ESTIMATORS, "advantage": ADVANTAGES}.get(name)


def set_value(cls, name: str, text: str):
    """The value of ``--set name=text`` for a field of the dataclass ``cls`` (None: unknown): the
    text itself for a field that holds text (annotated ``str`` or ``str | None``; ``null`` is None
    for the latter), else ``parse_value``."""
    from sandbox.core.validation import field_kind

    f = next((f for f in dataclasses.fields(cls) if f.name == name), None) if cls is not None else None
    kind, optional = field_kind(f) if f is not None else ("", False)
    if kind == "str" and not (optional and text.strip() == "null"):
        return text
    return parse_value(text)


def lock_timeout_option(q: argparse.ArgumentParser) -> None:
    q.add_argument("--lock-timeout", type=seconds_at_least_0, default=None, metavar="SECONDS",
                   help="how long to wait for a job that a process on another host has claimed before "
                        "giving up on it (default: $SANDBOX_LOCK_TIMEOUT or 600)")


def seconds_at_least_0(text: str) -> float:
    """An argparse type: a finite number of seconds ≥ 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds ≥ 0, got {text!r}")
    return value



def device_option(q: argparse.ArgumentParser, what: str = "run configs whose task can run there (the others stay "
                  "on the CPU)") -> None:
    q.add_argument("--device", type=device_name, default=None,
                   help=f"cpu (default), cuda or cuda:N: {what}; a device other than cpu is part of a run's id")


def device_name(text: str) -> str:
    """An argparse type: 'cpu', 'cuda' or 'cuda:N'."""
    from sandbox.runtime.config import check_device

    try:
        check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def use_device(args: argparse.Namespace) -> None:
    """``--device`` for the job lists a command builds (``sandbox.jobs.devices``, ``$SANDBOX_DEVICE``,
    which notebook kernels and worker processes inherit)."""
    if getattr(args, "device", None):
        os.environ["SANDBOX_DEVICE"] = args.device
