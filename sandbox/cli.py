"""The ``sandbox`` command line: ``sandbox list`` (more subcommands arrive with the engine)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
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
    """Print every estimator, advantage, controller, friction and task with a one-line description
    and its defaults, and every figure ``sandbox reproduce`` can draw."""
    from sandbox.frictions import FRICTIONS
    from sandbox.runtime.task import TASKS, load_tasks
    from simulations import select

    load_tasks()
    figures = select()  # figure modules may register estimators of their own (e.g. prob_gate)
    tables = {
        "estimators": ("Estimators", ESTIMATORS),
        "advantages": ("Advantages", ADVANTAGES),
        "controllers": ("Controllers", CONTROLLERS),
        "frictions": ("Frictions", FRICTIONS),
        "tasks": ("Tasks", TASKS),
    }
    for key, (title, registry) in tables.items():
        if args.what in (None, key):
            _print_table(title, registry.describe())
    if args.what in (None, "figures"):
        _print_table("Figures (sandbox reproduce NAME or GROUP)",
                     [(f.name, f"[{f.group}] {f.title}", "") for f in figures])
    return 0


def load_plugin(module: str) -> None:
    """Import a user module by dotted name or by path to a ``.py`` file."""
    path = Path(module)
    if path.suffix == ".py":
        if not path.is_file():
            raise ValueError(f"--plugin file {module!r} does not exist")
        # its folder goes on sys.path, so that worker processes can import it too
        sys.path.insert(0, str(path.resolve().parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        return
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ValueError(f"--plugin module {module!r} cannot be imported: {err}") from err


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def config_from_args(args: argparse.Namespace):
    """A RunConfig from ``--config FILE.json`` and ``--set key=value`` overrides (dotted keys
    reach into dict fields, e.g. ``task_kwargs.K=10``; values are parsed as JSON when possible)."""
    from sandbox.runtime.config import RunConfig

    data = json.loads(Path(args.config).read_text()) if args.config else {}
    for item in args.set or []:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        target = data
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = _parse_value(value)
    return RunConfig.from_dict(data)


def cmd_run(args: argparse.Namespace) -> int:
    """Train one run and print its final metrics (mean and 95% CI over the population)."""
    from sandbox.analysis.stats import bootstrap_ci
    from sandbox.runtime.loop import train

    config = config_from_args(args)
    if args.async_workers:
        from sandbox.runtime.ray_async import AsyncConfig, train_async

        acfg = AsyncConfig(n_workers=args.async_workers, max_staleness=args.max_staleness, mode=args.async_mode,
                           address=args.ray_address)
        frame = train_async(config, acfg, progress=not args.quiet)
    else:
        frame = train(config, progress=not args.quiet)
    if args.out:
        frame.to_parquet(args.out)
    final = frame[frame["step"] == frame["step"].max()]
    print(f"run {config.run_id}: {config.task} / {config.estimator}, {len(final)} seed(s), step {int(final['step'].iloc[0])}")
    skip = {"step", "member", "seed", "run_id", "label", "completed_steps", "wall_time"}
    for column in final.columns:
        if column in skip or not pd_numeric(final[column]):
            continue
        values = final[column].astype(float).dropna()
        if len(values):
            print(f"  {column:<22} {bootstrap_ci(values.to_numpy())}")
    return 0


def pd_numeric(series) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the sweeps of figures (or groups) without their notebooks; resumable."""
    from sandbox.analysis.store import ResultsStore
    from sandbox.runtime.sweep import run_sweep
    from simulations import select

    store = ResultsStore(args.results)
    failed = 0
    for figure in select(args.names):
        report = run_sweep(figure.jobs(args.fidelity), store, backend=args.backend, workers=args.workers,
                           ray_address=args.ray_address, desc=figure.name)
        print(f"{figure.name}: {report.total} jobs, {report.skipped} already done, {report.computed} computed, "
              f"{len(report.failed)} failed")
        failed += len(report.failed)
    return 1 if failed else 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Sweeps + notebooks → paper_figures/ and a PASS/FAIL table of every claim."""
    from sandbox.reproduce import reproduce, summary

    outcomes = reproduce(args.names, fidelity=args.fidelity, results_dir=args.results, figures_dir=args.figures,
                         workers=args.workers, backend=args.backend)
    print(summary(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


def cmd_bench(args: argparse.Namespace) -> int:
    """Run benchmark scripts from benchmarks/ (each prints a table and its ratios)."""
    import subprocess

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    available = sorted(p.stem for p in root.glob("*.py") if not p.stem.startswith("_"))
    names = args.names or available
    status = 0
    for name in names:
        if name not in available:
            raise ValueError(f"unknown benchmark {name!r}; available: {available}")
        print(f"== benchmarks/{name}.py")
        status |= subprocess.call([sys.executable, str(root / f"{name}.py"), *args.extra])
    return status


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
                   help="comma-separated built-in recipes to compare with")
    p.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the battery's)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray)")
    p.add_argument("--out", default=None, help="report folder (default: scorecards/NAME-BATTERY)")
    p.add_argument("--results", default=None, help="results folder (default: $SANDBOX_RESULTS or results)")
    p.add_argument("--list-batteries", action="store_true", help="print every battery's cells and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_score)


def cmd_score(args: argparse.Namespace) -> int:
    """Run (or reuse) the battery's jobs, write scorecard.png|md|json and print the summary table."""
    from sandbox.scoring import battery_names, load_battery, score

    if args.list_batteries:
        for name in battery_names():
            print(load_battery(name).describe(), end="\n\n")
        return 0
    if not args.name:
        raise ValueError("score needs NAME (an estimator or recipe), or --list-batteries")
    settings = {}
    for item in args.score_settings:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        settings[key] = _parse_value(value)
    out = Path(args.out or f"scorecards/{args.name}-{args.battery}")
    frame = score(args.name, plugin=args.score_plugins, settings=settings, battery=args.battery,
                  against=args.against, seeds=args.seeds, backend=args.backend, out=out, results=args.results,
                  workers=args.workers, progress=not args.quiet, ray_address=args.ray_address)
    jobs = frame.attrs["jobs"]
    table = next(b for b in (out / "scorecard.md").read_text().split("\n\n") if b.startswith("| method"))
    print(f"{jobs['total']} jobs: {jobs['reused']} reused, {jobs['computed']} computed\n{table}\n"
          f"wrote {out / 'scorecard.png'}, {out / 'scorecard.md'}, {out / 'scorecard.json'}")
    return 0


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
    p = sub.add_parser("list", help="list estimators, advantages, controllers, frictions, tasks and figures")
    p.add_argument("what", nargs="?", choices=["estimators", "advantages", "controllers", "frictions", "tasks", "figures"])
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="train one run (a RunConfig) and print its final metrics")
    p.add_argument("--config", help="a JSON file with RunConfig fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a field (dotted for dict fields: task_kwargs.K=10); repeatable")
    p.add_argument("--out", help="write the per-step metrics to this parquet file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--async-workers", type=int, default=0,
                   help="run on Ray with this many rollout workers (0: the simulated loop)")
    p.add_argument("--max-staleness", type=int, default=0, help="Ray runtime: staleness budget in learner steps")
    p.add_argument("--async-mode", choices=["fixed_lag", "bounded"], default="fixed_lag")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.set_defaults(func=cmd_run)

    def sweep_options(q: argparse.ArgumentParser) -> None:
        q.add_argument("names", nargs="*", help="figures or groups (theory, mnist, sequences, llm); all if none")
        q.add_argument("--fidelity", choices=["quick", "full"], default="quick")
        q.add_argument("--results", default=os.environ.get("SANDBOX_RESULTS", "results"),
                       help="results folder (one parquet file per job)")
        q.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
        q.add_argument("--backend", choices=["local", "ray"], default="local")
        q.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray)")

    p = sub.add_parser("sweep", help="run figure sweeps (resumable: rerun after an interruption)")
    sweep_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("reproduce", help="sweeps + notebooks: write paper_figures/ and check every claim")
    sweep_options(p)
    p.add_argument("--figures", default=os.environ.get("SANDBOX_FIGURES", "paper_figures"))
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("bench", help="run benchmarks/ scripts")
    p.add_argument("names", nargs="*")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="arguments passed to the scripts after --")
    p.set_defaults(func=cmd_bench)
    add_score_parser(sub)
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
