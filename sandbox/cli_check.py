"""``sandbox check CONFIG``: the parser and command of ``sandbox.check`` (docs/check.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sandbox.cli_args import LazyChoices, check_run_options, device_option, use_device, writable_dir


def add_check_parser(sub) -> None:
    """``sandbox check CONFIG``: a verl or TRL configuration on its own frictions, against the built-ins.
    Nothing of ``sandbox.check`` is imported here (it pulls in scipy): the precisions are read when
    ``--precision`` is given or help is printed."""
    from sandbox.scoring.recipes import DEFAULT_AGAINST

    def precisions() -> list[str]:
        from sandbox.check.mapping import PRECISIONS

        return list(PRECISIONS)

    p = sub.add_parser("check", help="score a verl or TRL configuration on its own deployment's frictions")
    p.add_argument("config", help="a verl trainer YAML (nested or dotted keys) or a TRL GRPOConfig as YAML/JSON")
    p.add_argument("--framework", default=None, metavar="NAME==VERSION",
                   help="the framework version to read the config as: verl==0.9.1 (default for verl), verl@b178a3c, "
                        "trl==1.16.0 (default for TRL)")
    p.add_argument("--trainer", default=None, choices=["grpo", "async_grpo"],
                   help="TRL's trainer: GRPOTrainer or the experimental AsyncGRPOTrainer (default: told by the keys; "
                        "an AsyncGRPOConfig key such as max_staleness means async_grpo)")
    p.add_argument("--battery", default="quick", help="the standard battery to score on too: quick (default) or standard")
    p.add_argument("--out", default=None, help="report folder (default: checks/CONFIG-BATTERY)")
    p.add_argument("--ignore", action="extend", nargs="+", default=[], metavar="KEY",
                   help="check the rest of the config without KEY (a key we do not model); repeatable")
    p.add_argument("--precision", choices=LazyChoices(precisions), default=None, metavar="PRECISION",
                   help="%(choices)s: add the sampler/learner precision mismatch (the sampler's parameters in this dtype); "
                        "default: bf16 for a config with a rollout correction, else none; off: none")
    p.add_argument("--deployment-against", choices=["framework", "cached", "best", "all"], default="framework",
                   help="the rivals on the deployment cells: the losses the config's own framework can select, each "
                        "the config with one change (default: the verdict suggests the best as that change); or the "
                        "built-ins already computed there (cached: none on a first check, the cheapest), the best "
                        "on --battery, or all of --against (sandbox methods no framework setting selects)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the mapping, the deployment battery and what it would cost; run nothing")
    p.add_argument("--against", default=",".join(DEFAULT_AGAINST), help="comma-separated methods (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the battery's)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray)")
    p.add_argument("--results", default=None, help="results folder (default: $SANDBOX_RESULTS or results)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    device_option(p, "the cells whose task can run there (the others stay on the CPU)")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Print the mapping table, run (or reuse) both batteries, write check.md|png|json, print the verdict."""
    from sandbox.check import check
    from sandbox.scoring.api import check_run_args, parse_methods
    from sandbox.scoring.battery import battery_names

    if args.battery not in battery_names():
        raise ValueError(f"--battery must be one of {battery_names()}, got {args.battery!r}")
    check_run_options(args)
    check_run_args(args.backend, args.workers)
    results = writable_dir(args.results, "--results") if args.results is not None else None
    out = None if args.dry_run else writable_dir(args.out or f"checks/{Path(args.config).stem}-{args.battery}",
                                                 "--out")  # before any compute
    parse_methods("--against", args.against)
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(f"--seeds must be an integer ≥ 1, got {args.seeds}")
    use_device(args)
    mapping, deploy, _ = _prepare(args)
    print(mapping.text(), end="\n\n")
    print(deploy.describe(), end="\n\n")
    if args.dry_run:
        from sandbox.check.api import dry_run

        print("\n".join(dry_run(args.config, args.battery, args.ignore, args.precision, args.against, args.seeds,
                                 args.workers, args.results, args.deployment_against, args.framework, args.trainer)))
        print("dry run: nothing was run or written")
        return 0
    report = check(args.config, battery=args.battery, out=out, ignore=args.ignore, precision=args.precision,
                   against=args.against, seeds=args.seeds, backend=args.backend, workers=args.workers,
                   results=results, progress=not args.quiet, ray_address=args.ray_address,
                   deployment_against=args.deployment_against, framework=args.framework, trainer=args.trainer)
    jobs = [report.deployment.attrs["jobs"], report.standard.attrs["jobs"]]
    print(f"{sum(j['total'] for j in jobs)} jobs: {sum(j['reused'] for j in jobs)} reused, "
          f"{sum(j['computed'] for j in jobs)} computed")
    print("\n".join(f"- {line}" for line in report.verdict))
    print("wrote " + ", ".join(str(p) for p in report.files))
    return 0


def _prepare(args: argparse.Namespace):
    """``prepare`` on the command's arguments; a refusal prints the warnings the mapping had found
    before it (to stderr), then ends the run as one line."""
    import sys

    from sandbox.check import prepare
    from sandbox.check.mapping import Refusal

    try:
        return prepare(args.config, args.battery, args.ignore, args.precision, args.seeds,
                       framework=args.framework, trainer=args.trainer)
    except Refusal as err:
        for warning in err.warnings:
            print(f"sandbox: warning: {warning}", file=sys.stderr)
        raise


__all__ = ["add_check_parser", "cmd_check"]
