"""The ``sandbox`` command line: ``sandbox list | run | sweep | reproduce | score | check | bench``.

Bad input ends in one line on stderr naming the argument and what is valid (exit 2); Ctrl-C stops
at once, keeps every finished result, says how to resume (exit 130); ``sandbox list | head`` ends
quietly.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import textwrap
from pathlib import Path

from sandbox.advantages import ADVANTAGES
from sandbox.cli_args import (
    check_run_options,
    config_from_args,
    device_option,
    int_at_least,
    load_plugin,
    lock_timeout_option,
    metrics_file,
    use_device,
    writable_dir,
)
from sandbox.cli_check import add_check_parser
from sandbox.cli_score import add_score_parser
from sandbox.controllers import CONTROLLERS
from sandbox.core.plugins import load_env_plugins
from sandbox.core.registry import OVERRIDE_ENV, overrides
from sandbox.estimators import ESTIMATORS

EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 130, 141


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


def admission_docs() -> dict[str, str]:
    """What each staleness admission rule (``sandbox.frictions.admissions``, plugins included) does
    with a rollout staler than the budget: its docstring's first paragraph."""
    from sandbox.frictions.admissions import ADMISSION_RULES, admission_names

    rows = {name: summary for name, summary, _ in ADMISSION_RULES.describe()}
    return {name: rows[name] for name in admission_names()}


def cmd_list(args: argparse.Namespace) -> int:
    """Print every estimator, advantage, controller, friction and task with a one-line description
    and its defaults, and every figure ``sandbox reproduce`` can draw."""
    from sandbox.frictions import FRICTIONS
    from sandbox.reproduce import figures as figure_module
    from sandbox.tasks import TASKS, load_tasks

    load_tasks()
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
        if key == "frictions" and args.what in (None, key):
            from sandbox.frictions.delays import DELAYS, delay_kinds

            kinds = {row[0]: row for row in DELAYS.describe()}
            _print_table("Staleness delay kinds (staleness.kind, with staleness.broadcast_every)",
                         [kinds[name] for name in delay_kinds()])
            _print_table("Staleness admission policies (staleness.admission, with staleness.budget)",
                         [(name, doc, "") for name, doc in admission_docs().items()])
    if args.what in (None, "policies", "objectives"):
        _print_composition(args.what)
    if args.what in (None, "figures"):
        _print_table("Figures (sandbox reproduce NAME or GROUP)",
                     [(f.name, f"[{f.group}] {f.title}", "") for f in figure_module().select()])
    return 0


def _print_composition(what: str | None) -> None:
    """The policy families and objectives a task's ``policy`` and ``objective`` keys name, each with
    the observations it reads (``sandbox.core.observations``)."""
    from sandbox.core.observations import kinds
    from sandbox.objectives import OBJECTIVES
    from sandbox.policies import POLICIES

    for key, title, registry in (("policies", "Policies (task_kwargs.policy, with task_kwargs.policy_kwargs)", POLICIES),
                                 ("objectives", "Objectives (task_kwargs.objective)", OBJECTIVES)):
        if what in (None, key):
            reads = {name: kinds(registry.get(name).reads) if registry.get(name).reads else "any observations"
                     for name in registry.names()}
            _print_table(title, [(name, f"reads {reads[name]}: {summary}", "") for name, summary, _ in registry.describe()])


# ----------------------------------------------------------------------------- commands
def cmd_run(args: argparse.Namespace) -> int:
    """Train one run; print its main metric's stability and its final metrics; store it."""
    from sandbox.cli_run import async_config_from_args, report, run_configs, train_and_store
    from sandbox.jobs.store import ResultsStore

    out = metrics_file(args.out) if args.out else None  # before any work
    config = config_from_args(args)
    configs = run_configs(config.replace(device=args.device) if args.device else config, args.seeds)
    store = None if args.no_store else ResultsStore(writable_dir(args.results, "--results"))
    acfg = async_config_from_args(args)
    frame, run_ids, paths = train_and_store(configs, acfg, store, progress=not args.quiet)
    if out is not None:
        frame.to_csv(out, index=False) if out.suffix.lower() == ".csv" else frame.to_parquet(out)
    print(report(frame, configs[0], run_ids))
    if paths:
        print(f"stored: {', '.join(str(p) for p in paths)}  (--no-store to skip)")
    return 0


def _with_ray(args: argparse.Namespace):
    """Start or join Ray for ``--backend ray`` (one line when no cluster answers); None otherwise."""
    check_run_options(args)
    if args.backend != "ray":
        return None
    from sandbox.core.processes import start_ray

    return start_ray(args.ray_address, args.workers or os.cpu_count(), progress=True)


def _stop_ray(started) -> None:
    if started:
        import ray

        ray.shutdown()


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the sweeps of figures (or groups) without their notebooks; resumable."""
    from sandbox.jobs.costs import announce, finished_ids, plan
    from sandbox.jobs.devices import device_from_env, on_device
    from sandbox.jobs.store import ResultsStore
    from sandbox.jobs.sweep import run_sweep, unique_jobs
    from sandbox.reproduce import figures as figure_registry

    use_device(args)
    figures = figure_registry().select(args.names)
    store = ResultsStore(writable_dir(args.results, "--results"))
    jobs = {figure.name: on_device(figure.jobs(args.fidelity), device_from_env()) for figure in figures}
    everything = unique_jobs([j for js in jobs.values() for j in js])
    started, failed = _with_ray(args), 0
    try:
        announce(plan(everything, finished_ids(everything, store), args.workers, store).line(f"sweep {args.fidelity}"))
        for figure in figures:
            report = run_sweep(jobs[figure.name], store, backend=args.backend, workers=args.workers,
                               ray_address=args.ray_address, desc=figure.name, announce=False)
            count = f"{report.total} job{'s' if report.total != 1 else ''}"
            print(f"{figure.name}: {count}, {report.skipped} already done, {report.computed} computed, "
                  f"{len(report.failed)} failed")
            failed += len(report.failed)
    finally:
        _stop_ray(started)
    return 1 if failed else 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Sweeps + notebooks → figures and a PASS/FAIL table of every claim."""
    from sandbox.reproduce import default_figures_dir, reproduce, summary

    use_device(args)
    figures = writable_dir(args.figures or str(default_figures_dir(args.fidelity)), "--figures")
    results = writable_dir(args.results, "--results")
    started = _with_ray(args)
    try:
        outcomes = reproduce(args.names, fidelity=args.fidelity, results_dir=results, figures_dir=figures,
                             workers=args.workers, backend=args.backend, ray_address=args.ray_address,
                             rerun=args.rerun, base_seed=args.base_seed, allow_dirty=args.allow_dirty or None,
                             recompute=args.recompute)
    finally:
        _stop_ray(started)
    print(summary(outcomes))
    print(f"figures: {figures}/")
    if not all(o.made for o in outcomes):  # a figure that could not be made is an error of the run
        return 1
    return 1 if args.strict and not all(o.ok for o in outcomes) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Run benchmark scripts from benchmarks/ (each prints a table and its ratios)."""
    import subprocess

    from tqdm.auto import tqdm

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    available = sorted(p.stem for p in root.glob("*.py") if not p.stem.startswith("_"))
    unknown = [n for n in args.names if n not in available]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; available: {available}")
    names, status = args.names or available, 0
    with tqdm(total=len(names), desc="benchmarks", unit="script") as bar:
        for name in names:
            bar.clear()  # the script's table gets the lines; the bar is redrawn between scripts
            print(f"== benchmarks/{name}.py", flush=True)
            status |= subprocess.call([sys.executable, str(root / f"{name}.py"), *args.extra])
            bar.update(1)
    return status


# ----------------------------------------------------------------------------- the parser
def add_list_parser(sub) -> None:
    p = sub.add_parser("list", help="list estimators, advantages, controllers, frictions, tasks and figures")
    p.add_argument("what", nargs="?", choices=["estimators", "advantages", "controllers", "frictions", "tasks", "policies",
                                                  "objectives", "figures"])
    p.set_defaults(func=cmd_list)


def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="train one run (a RunConfig), print its stability and final metrics, store it",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=textwrap.dedent("""\
        examples:
          sandbox run --set task=bandit --set estimator=dg --seeds 8
          sandbox run --set staleness.kind=fixed --set staleness.D=8     # simulated staleness (kind is required)
          sandbox run --set 'frictions=[["landmine",{"p_bug":0.1}]]' --set 'controllers=[["gac",{}]]'"""))
    p.add_argument("--config", help="a JSON file with RunConfig fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a field (dotted for dict fields: task_kwargs.K=10; JSON values: "
                        "frictions=[[\"landmine\",{\"p_bug\":0.1}]]); repeatable. staleness.D > 0 needs staleness.kind "
                        "(fixed, uniform, geometric or per_actor)")
    p.add_argument("--seeds", type=int_at_least(1), default=None,
                   help="seeds: task_kwargs.population = N where the task batches seeds, else N runs (seed, seed+1, …)")
    p.add_argument("--out", help="also write the per-step metrics to this file: NAME.parquet or NAME.csv "
                                 "(checked before training)")
    p.add_argument("--results", default=os.environ.get("SANDBOX_RESULTS", "results"),
                   help="results store the run is saved to (default: results/ or $SANDBOX_RESULTS)")
    p.add_argument("--no-store", action="store_true", help="do not save the run in the results store")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--async-workers", type=int_at_least(0), default=0,
                   help="run on Ray with this many rollout workers (0: the simulated loop)")
    p.add_argument("--async-mode", choices=["fixed_lag", "bounded"], default=None,
                   help="kept for older scripts: both realise RunConfig.staleness on Ray ('bounded' insists on "
                        "its pace admission)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local Ray)")
    device_option(p, "the run's device (the same as --set device=…)")
    p.set_defaults(func=cmd_run, interrupted="the interrupted run was not stored; rerun the command to train it")


def sweep_options(q: argparse.ArgumentParser) -> None:
    q.add_argument("names", nargs="*", help="figures or groups (theory, mnist, sequences, llm); all if none")
    q.add_argument("--fidelity", choices=["quick", "paper", "full"], default="quick",
                   help="quick: minutes (the test suite's); paper: the papers' settings (≈ 8 h on 2 cores from "
                        "scratch, minutes from the committed per-seed data); "
                        "full: the complete grid, for a Ray cluster or a GPU")
    q.add_argument("--results", default=os.environ.get("SANDBOX_RESULTS", "results"),
                   help="results folder (one parquet file per job)")
    q.add_argument("--workers", type=int_at_least(1), default=None, help="parallel processes (default: CPU count)")
    q.add_argument("--backend", choices=["local", "ray"], default="local")
    q.add_argument("--ray-address", default=None, help="Ray cluster address, with --backend ray (default: a local Ray)")
    q.add_argument("--accept-stale-code", action="store_true",
                   help="keep stored results made by another version of the sandbox/ source (default: recompute them)")
    lock_timeout_option(q)
    device_option(q)


RESUME = "finished results are kept in {results}/; rerun the same command to resume"


def add_sweep_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run figure sweeps (resumable: rerun after an interruption)")
    sweep_options(p)
    p.set_defaults(func=cmd_sweep, interrupted=RESUME)


def add_reproduce_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="sweeps + notebooks: write the figures and check every claim")
    sweep_options(p)
    p.add_argument("--figures", default=None,
                   help="output folder (default: $SANDBOX_FIGURES, else figures/quick at quick fidelity and "
                        "figures/full at full — git-ignored — and paper_figures, with CLAIMS.md, at paper fidelity)")
    p.add_argument("--rerun", action="store_true", help="execute notebooks even when their inputs did not change")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a claim FAILs too (default: 0 when every figure was made — a FAIL is a result)")
    p.add_argument("--base-seed", type=int_at_least(0), default=0,
                   help="offset of every job's seed (K moves seeds by K·1000: an independent replication)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="at paper fidelity, write into this repository from a tree with uncommitted changes "
                        "(CLAIMS.md then says so; default: refused, or $SANDBOX_ALLOW_DIRTY)")
    p.add_argument("--recompute", action="store_true",
                   help="run the selected figures' jobs at this commit instead of restoring their committed per-seed "
                        "data (their stored results are discarded; CLAIMS.md then names this commit alone)")
    p.set_defaults(func=cmd_reproduce, interrupted=RESUME)


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="run benchmarks/ scripts", usage="sandbox bench [NAME ...] [-- SCRIPT ARGS ...]")
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks/NAME.py; all if none")
    p.set_defaults(func=cmd_bench)


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``sandbox run: error: argument --seeds: … (see --help)``."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


PLUGIN_HELP = "import MODULE (a module or .py file) first, so the estimators it registers are available; repeatable"
OVERRIDE_HELP = ("let a plugin take the built-in name NAME (an estimator, recipe, task, friction …); every command, "
                 "and every worker, then uses the plugin's; repeatable ($SANDBOX_OVERRIDE)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="sandbox", description="Policy-gradient estimators under distributed-RL frictions.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE", help=PLUGIN_HELP)
    parser.add_argument("--override", action="append", default=[], metavar="NAME", help=OVERRIDE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_list_parser, add_run_parser, add_sweep_parser, add_reproduce_parser, add_score_parser,
                add_check_parser, add_bench_parser):
        add(sub)
    for name, command in sub.choices.items():  # `sandbox list --plugin F` as well as `sandbox --plugin F list`
        command.add_argument("--override", dest="sub_overrides", action="append", default=[], metavar="NAME",
                             help=OVERRIDE_HELP)
        if name != "score":  # score's own --plugin registers the estimator it scores
            command.add_argument("--plugin", dest="sub_plugins", action="append", default=[], metavar="MODULE",
                                 help=PLUGIN_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; while it runs, the objects alive when it starts (torch's, the registries')
    are frozen out of the cyclic collector's traversals (``gc.freeze``: each full collection would
    walk them again, ≈ 0.05–0.1 CPU-s apiece as pandas, scipy and the run's modules load)."""
    gc.freeze()
    try:
        return _main(argv)
    finally:
        gc.unfreeze()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    argv, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(argv)
    if extra and args.command != "bench":
        parser.error("arguments after -- are passed to benchmark scripts: only sandbox bench takes them")
    args.extra = extra
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        names = [*args.override, *getattr(args, "sub_overrides", [])]
        if names:  # before any plugin registers; inherited by every worker
            os.environ[OVERRIDE_ENV] = ",".join(dict.fromkeys([*overrides(), *names]))
        load_env_plugins()
        for module in [*args.plugin, *getattr(args, "sub_plugins", [])]:
            load_plugin(module)
        if getattr(args, "accept_stale_code", False):  # read by every run_sweep, notebooks' included
            os.environ["SANDBOX_ACCEPT_STALE_CODE"] = "1"
        if getattr(args, "lock_timeout", None) is not None:  # the same
            os.environ["SANDBOX_LOCK_TIMEOUT"] = str(args.lock_timeout)
        return int(args.func(args) or 0)
    except ValueError as err:  # bad input: one line, no traceback
        print(f"sandbox: error: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        hint = getattr(args, "interrupted", "").format(**vars(args))
        print(f"\nsandbox: interrupted{'; ' + hint if hint else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (sandbox list | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:  # anything else: one line, the traceback with -v
        if args.verbose:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"sandbox: error: {type(err).__name__}: {first} (rerun with -v for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
