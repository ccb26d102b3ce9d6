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
    from sandbox.reproduce import figures as figure_module
    from sandbox.tasks import TASKS, load_tasks

    load_tasks()
    figures = figure_module().select()  # figure modules may register estimators of their own (e.g. prob_gate)
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
    from sandbox.reproduce import figures
    from sandbox.runtime.sweep import run_sweep

    store = ResultsStore(args.results)
    failed = 0
    for figure in figures().select(args.names):
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
                         workers=args.workers, backend=args.backend, base_seed=args.base_seed)
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
    p.add_argument("--base-seed", type=int, default=0,
                   help="offset of every job's seed (K moves seeds by K·1000: an independent replication)")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("bench", help="run benchmarks/ scripts")
    p.add_argument("names", nargs="*")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="arguments passed to the scripts after --")
    p.set_defaults(func=cmd_bench)
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
