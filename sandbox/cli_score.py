"""``sandbox score NAME``: the parser and command of the scorecard (``sandbox.scoring``)."""

from __future__ import annotations

import argparse

from sandbox.cli_args import (
    check_run_options,
    device_option,
    lock_timeout_option,
    set_value,
    use_device,
    writable_dir,
)


def add_score_parser(sub) -> None:
    """``sandbox score NAME``: score an estimator on a battery against the built-ins."""
    from sandbox.scoring.recipes import DEFAULT_AGAINST

    p = sub.add_parser("score", help="score an estimator on a battery of frictions against the built-ins")
    p.add_argument("name", nargs="?", help="estimator (registered, or from --plugin) or built-in recipe")
    p.add_argument("--plugin", dest="score_plugins", action="append", default=[], metavar="FILE",
                   help="a .py file (or module) that registers the estimator; repeatable")
    p.add_argument("--set", dest="score_settings", action="append", default=[], metavar="KEY=VALUE",
                   help="estimator hyperparameter (or advantage=, advantage_kwargs=, controllers=); repeatable")
    p.add_argument("--battery", default="quick", help="battery name (see --list-batteries)")
    p.add_argument("--against", default=",".join(DEFAULT_AGAINST),
                   help="comma-separated methods to compare with: built-in recipes (default: %(default)s) or any "
                        "registered estimator (sandbox list estimators), e.g. dppo,vespo")
    p.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the battery's)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray)")
    p.add_argument("--out", default=None, help="report folder (default: scorecards/NAME-BATTERY)")
    p.add_argument("--results", default=None, help="results folder (default: $SANDBOX_RESULTS or results)")
    p.add_argument("--list-batteries", action="store_true", help="print every battery's cells and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    device_option(p, "the cells whose task can run there (the others stay on the CPU)")
    lock_timeout_option(p)
    p.set_defaults(func=cmd_score)


def cmd_score(args: argparse.Namespace) -> int:
    """Run (or reuse) the battery's jobs, write scorecard.png|md|json and print the summary table."""
    from sandbox.scoring import battery_names, load_battery, score
    from sandbox.scoring.runner import import_plugin

    if args.list_batteries:
        for name in battery_names():
            print(load_battery(name).describe(), end="\n\n")
        return 0
    if not args.name:
        raise ValueError("score needs NAME (an estimator or recipe), or --list-batteries")
    check_run_options(args)
    use_device(args)
    settings = {}
    for plugin in args.score_plugins:  # the estimator's fields decide how --set values parse
        import_plugin(plugin)
    owner = _estimator_class(args.name)
    for item in args.score_settings:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        settings[key] = set_value(owner, key, value)
    out = writable_dir(args.out if args.out is not None else f"scorecards/{args.name}-{args.battery}", "--out")
    results = writable_dir(args.results, "--results") if args.results is not None else None
    frame = score(args.name, plugin=args.score_plugins, settings=settings, battery=args.battery,
                  against=args.against, seeds=args.seeds, backend=args.backend, out=out, results=results,
                  workers=args.workers, progress=not args.quiet, ray_address=args.ray_address)
    jobs = frame.attrs["jobs"]
    table = next(b for b in (out / "scorecard.md").read_text().split("\n\n") if b.startswith("| method"))
    print(f"{jobs['total']} jobs: {jobs['reused']} reused, {jobs['computed']} computed\n{table}\n"
          f"wrote {out / 'scorecard.png'}, {out / 'scorecard.md'}, {out / 'scorecard.json'}")
    return 0


def _estimator_class(name: str):
    """The estimator class NAME (a registered estimator, or a recipe's), None if unknown."""
    from sandbox.estimators import ESTIMATORS
    from sandbox.methods import recipe_of

    name = (recipe_of(name) or {"estimator": name})["estimator"]
    return ESTIMATORS.get(name) if name in ESTIMATORS else None


__all__ = ["add_score_parser", "cmd_score"]
