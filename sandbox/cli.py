"""The ``sandbox`` command line: ``sandbox list`` (more subcommands arrive with the engine)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
import textwrap
from pathlib import Path

from sandbox.advantages import ADVANTAGES
from sandbox.controllers import CONTROLLERS
from sandbox.estimators import ESTIMATORS


def _print_table(title: str, rows: list[tuple[str, str, str]], width: int = 100) -> None:
    print(f"{title} ({len(rows)})")
    name_w = max(len(r[0]) for r in rows) + 2
    indent = " " * (name_w + 2)
    for name, summary, defaults in rows:
        lines = textwrap.wrap(summary, width - name_w - 2) or [""]
        print(f"  {name:<{name_w}}{lines[0]}")
        for line in lines[1:]:
            print(indent + line)
        if defaults:
            for line in textwrap.wrap(f"defaults: {defaults}", width - name_w - 2):
                print(indent + line)
    print()


def cmd_list(args: argparse.Namespace) -> int:
    """Print every estimator, advantage and controller with a one-line description and defaults."""
    tables = {
        "estimators": ("Estimators", ESTIMATORS),
        "advantages": ("Advantages", ADVANTAGES),
        "controllers": ("Controllers", CONTROLLERS),
    }
    for key, (title, registry) in tables.items():
        if args.what in (None, key):
            _print_table(title, registry.describe())
    return 0


def load_plugin(module: str) -> None:
    """Import a user module by dotted name or by path to a ``.py`` file."""
    path = Path(module)
    if path.suffix == ".py":
        if not path.is_file():
            raise ValueError(f"--plugin file {module!r} does not exist")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        return
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ValueError(f"--plugin module {module!r} cannot be imported: {err}") from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sandbox",
        description="Policy-gradient estimators under distributed-RL frictions.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable), so the estimators it registers are available",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list estimators, advantages and controllers with their defaults")
    p.add_argument("what", nargs="?", choices=["estimators", "advantages", "controllers"])
    p.set_defaults(func=cmd_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        for module in args.plugin:
            load_plugin(module)
        return int(args.func(args) or 0)
    except ValueError as err:  # bad input: a clear message, no traceback
        print(f"sandbox: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
