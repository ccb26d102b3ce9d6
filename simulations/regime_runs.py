"""The matched regime's runs: its calibration, its arms and controls, and the table of
``docs/regime.md`` (issue 42). Every arm is declared here before its data exists.

    python -m simulations.regime_runs calibrate                  # mantissa bits for the published KL
    python -m simulations.regime_runs run control --base-seed 0  # one arm: 8 seeds, its steps
    python -m simulations.regime_runs table --figure docs/regime.png   # the docs' tables and figure
    python -m simulations.regime_runs run control --base-seed 5 --seeds 4 --lr 2e-5   # a pilot
    python -m simulations.regime_runs pilots                     # the pilots' numbers (docs/regime.md)
    python -m simulations.regime_runs docs                       # rewrite docs/regime.md's tables and figure

Runs write their per-seed trajectories to ``simulations/data/regime/ARM-bBASE.parquet`` (one row per
step and seed; ``simulations.regime.probe``'s columns). ``--steps`` and ``--seeds`` shrink a run for
a smoke test (its file name then says so, and the table ignores it). ``--lr``, ``--task KEY=VALUE``
and ``--friction KEY=VALUE`` (a knob of the arm's friction, e.g. ``tail_rate=0.01``) make a **pilot**, a run off the declared arms that chooses a knob: it is written to
``simulations/data/regime/pilot/`` (its name says its changes), never read by the table, and its
numbers are printed by ``pilots`` against the negative control's rule and the positive control's
collapse count.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

DATA = Path(__file__).parent / "data" / "regime"
DOCS = Path(__file__).resolve().parents[1] / "docs"

#: the sampler's mantissa bits whose k3 KL(μ‖π) at the warm start is the published bf16 (≈ 1e-3)
#: and fp16 (≈ 1e-5) level (Precision-RL, figures/verl_oat_fix.png), measured by ``calibrate``
#: on base seed 0 (docs/regime.md, Calibration; the third round's warm start: T = 21, slip 0.5); the
#: real formats have 7 and 10. ``bf16-long``: the bits whose token KL at T = 16 puts T·κ where a
#: 1,000-token bf16 answer puts it (κ = 1e-3 · 1,000/16, measured 0.056), the length knob of issue 42,
#: item 5 — calibrated on the first round's warm start (no slips; bf16 was 4.35 bits there) and not re-run since
BITS = {"bf16": 3.65, "fp16": 7.06, "bf16-long": 1.36}
#: the lr whose per-answer lag-10 KL at T = 16 is a long answer's at the published per-token lag-KL
LONG_LR = 3e-4


@dataclass(frozen=True)
class Arm:
    """One configuration of the regime: its estimator, frictions and delay; ``steps`` learner steps;
    ``role``: 'negative' (must learn), 'positive' (must collapse) or 'table' (measured only)."""

    name: str
    role: str
    estimator: str = "reinforce"
    estimator_kwargs: dict = field(default_factory=dict)
    frictions: tuple = ()
    staleness: dict = field(default_factory=dict)
    steps: int = 1000
    lr: float | None = None  # None: the regime task's lr (``RegimeTask.default_lr``)
    why: str = ""


ARMS = {arm.name: arm for arm in (
    Arm("control", "negative", why="synchronous, no mismatch: must learn without freezing"),
    Arm("bf16", "positive", frictions=(("sampler_rounding", {"mantissa_bits": BITS["bf16"]}),),
        why="the sampler rounded to the calibrated bf16 level, no correction (Precision-RL's GRPO arm)"),
    # the heavy tail at the published max |π − μ| ≈ 1 (Precision-RL, verl_oat_fix.png): chosen on the pilot
    # seeds (base seed 5, docs/regime.md) as the rate whose k3 KL(μ‖π) stays near the published ≈ 1e-3
    # (0.01 put it at 0.3–0.8); 0 of 4 pilot seeds collapsed at either rate — declared to confirm it
    Arm("bf16-tail", "positive", frictions=(("sampler_rounding", {"mantissa_bits": BITS["bf16"], "tail_rate": 1e-3,
                                                                  "tail_boost": 8.0}),),
        why="the calibrated bf16 sampler whose least likely token takes ≈ all the mass at 1 position in 1,000 "
            "(max |π − μ| ≈ 1, as published), no correction"),
    Arm("bf16-long", "positive", frictions=(("sampler_rounding", {"mantissa_bits": BITS["bf16-long"]}),),
        steps=500, why="the bf16 mismatch of a 1,000-token answer (T·κ = 1) on T = 16, no correction"),
    Arm("lag10-tis", "table", estimator="tis", staleness={"kind": "fixed", "D": 10},
        why="10 updates stale, token-level truncated IS (the published lag-10 setting)"),
    Arm("lag16-seq-is", "positive", estimator="is_pg", staleness={"kind": "fixed", "D": 16}, steps=500,
        why="16 updates stale, unclipped sequence-level IS (the published TIS-at-lag collapse, uncorrected)"),
    # the lag arms at the per-answer lag-KL of a long answer (issue 42, item 5: T·κ held): the published
    # lag-10 KL ≈ 5e-4 per token over ≈ 1,000 tokens is ≈ 0.5 per answer; here answers are ≈ 10 tokens,
    # so the per-token lag-10 KL must be ≈ 100× — lr 10× (KL ∝ lr²). Declared with their partner
    # control at the same lr, which must still learn (else the lr, not the lag, decides).
    Arm("control-long", "negative", steps=500, lr=LONG_LR,
        why="synchronous, no mismatch, at the long-answer lr: the lag arm's partner, must learn"),
    Arm("lag16-seq-is-long", "positive", estimator="is_pg", staleness={"kind": "fixed", "D": 16}, steps=500,
        lr=LONG_LR, why="16 updates stale, unclipped sequence-level IS, at the per-answer lag-KL of a long answer"),
)}


def arm_config(arm: Arm, base_seed: int, seeds: int = 8, steps: int | None = None, device: str = "cpu",
               **task_kwargs):
    """The ``RunConfig`` of ``arm`` at ``base_seed`` with ``seeds`` seeds (``task_kwargs`` override the
    regime task's knobs: ``answer_len``, ``sft_steps`` …)."""
    from simulations.regime import regime_config

    return regime_config(task_kwargs={"population": seeds, **task_kwargs}, estimator=arm.estimator,
                         estimator_kwargs=dict(arm.estimator_kwargs), frictions=arm.frictions,
                         staleness=dict(arm.staleness), steps=steps or arm.steps, seed=base_seed, label=arm.name,
                         device=device, **({"lr": arm.lr} if arm.lr is not None else {}))


def data_path(arm: str, base_seed: int, seeds: int = 8, steps: int | None = None, changes: dict | None = None) -> Path:
    """Where a run's trajectories go: the arm's file, a smoke run's, or (``changes``: lr, task or
    friction knobs off the declared arm; friction knobs as ``friction.KEY``) a pilot's."""
    if changes:
        tail = "".join(f"-{k.removeprefix('friction.')}{v}" for k, v in sorted(changes.items()))
        return DATA / "pilot" / f"{arm}-b{base_seed}-s{seeds}-t{steps or ARMS[arm].steps}{tail}.parquet"
    full = seeds == 8 and steps in (None, ARMS[arm].steps)
    return DATA / (f"{arm}-b{base_seed}.parquet" if full else f"smoke-{arm}-b{base_seed}-s{seeds}-t{steps}.parquet")


def run(arm: str, base_seed: int, seeds: int = 8, steps: int | None = None, every: int = 10,
        changes: dict | None = None) -> Path:
    """Probe one arm and write its trajectories (atomically: a killed run leaves no file), stamped
    with the commit of the tree that made them (``-dirty``: uncommitted changes); ``changes``
    (``lr``, task knobs, ``friction.KEY`` knobs of the arm's friction) make it a pilot (``data_path``)."""
    from sandbox.analysis.provenance import git_commit
    from simulations.regime import probe

    changes = dict(changes or {})
    path = data_path(arm, base_seed, seeds, steps, changes)
    lr = changes.pop("lr", None)
    declared = ARMS[arm] if lr is None else replace(ARMS[arm], lr=lr)
    friction = {k.removeprefix("friction."): changes.pop(k) for k in sorted(changes) if k.startswith("friction.")}
    if friction:
        declared = replace(declared, frictions=with_friction_knobs(declared, friction))
    commit = git_commit()  # read before the run: the code that runs
    frame = probe(arm_config(declared, base_seed, seeds, steps, **changes), every=every)
    frame["arm"], frame["base_seed"], frame["commit"] = arm, base_seed, commit
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(path)
    return path


def with_friction_knobs(arm: Arm, knobs: dict) -> tuple:
    """``arm``'s frictions with ``knobs`` set on its one friction (a pilot of a friction knob)."""
    if len(arm.frictions) != 1:
        raise ValueError(f"--friction needs an arm with exactly one friction; {arm.name!r} has {len(arm.frictions)}")
    name, kwargs = arm.frictions[0]
    return ((name, {**kwargs, **knobs}),)


def pilots() -> pd.DataFrame:
    """One row per pilot file: the negative control's numbers (``simulations.regime.negative_control``),
    the lag-10 KL over the first 200 steps (median over seeds), the seeds collapsed by the positive
    control's rule (``simulations.regime.collapsed``), and the largest max |π − μ| (median over seeds)."""
    from simulations.regime import collapsed, negative_control

    rows = []
    for path in sorted((DATA / "pilot").glob("*.parquet")):
        frame = pd.read_parquet(path)
        early = frame[frame["step"] <= 200].groupby("member")["lag_k3"].mean().median()
        rows.append({"pilot": path.stem, "commit": frame["commit"].iloc[0] if "commit" in frame else "",
                     **negative_control(frame), "lag10_k3_early": float(early),
                     "collapsed": int(collapsed(frame).sum()), "seeds": int(frame["member"].nunique()),
                     "max_gap": float(frame.groupby("member")["max_abs_dp"].max().median())})
    return pd.DataFrame(rows)


def calibrate(base_seed: int = 0, seeds: int = 8) -> dict:
    """Mantissa bits for the published bf16 / fp16 KL at the warm start, and the real formats' KL."""
    from simulations.regime import calibrate_bits, warm_mismatch

    config = arm_config(ARMS["control"], base_seed, seeds, steps=1)
    out = {"base_seed": base_seed, "seeds": seeds}
    for name, bits in (("bf16", 7), ("fp16", 10)):
        out[f"{name}_real_bits_k3"] = warm_mismatch(config, bits)[1]
    for name, target in (("bf16", 1e-3), ("fp16", 1e-5)):
        out[f"{name}_bits"], out[f"{name}_k3"] = calibrate_bits(config, target, start=7.0 if name == "bf16" else 10.0)
    return out


def doc_blocks() -> dict[str, str]:
    """docs/regime.md's generated blocks (``regime_table.DOC_MARKERS``) from the committed data."""
    from simulations.regime_table import controls, pilot_table, table

    frame = load()
    return {"regime-pilots": pilot_table(pilots()), "regime-table": table(frame),
            "regime-controls": controls(frame, {name: arm.role for name, arm in ARMS.items()}) if not frame.empty else ""}


def load(arms=None) -> pd.DataFrame:
    """Every full run's trajectories (smoke runs left out)."""
    files = [p for p in sorted(DATA.glob("*.parquet")) if not p.name.startswith("smoke-")]
    frames = [pd.read_parquet(p) for p in files]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return frame if arms is None or frame.empty else frame[frame["arm"].isin(arms)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("calibrate", help="mantissa bits for the published bf16/fp16 KL at the warm start")
    c.add_argument("--base-seed", type=int, default=0)
    r = sub.add_parser("run", help="probe one arm and write its trajectories")
    r.add_argument("arm", choices=sorted(ARMS))
    r.add_argument("--base-seed", type=int, default=0)
    r.add_argument("--seeds", type=int, default=8)
    r.add_argument("--steps", type=int, default=None)
    r.add_argument("--lr", type=float, default=None, help="a pilot: this lr instead of the arm's")
    r.add_argument("--task", action="append", default=[], metavar="KEY=VALUE",
                   help="a pilot: a regime task knob (a number), e.g. sft_slip_spread=0.35")
    r.add_argument("--friction", action="append", default=[], metavar="KEY=VALUE",
                   help="a pilot: a knob of the arm's friction (a number), e.g. tail_rate=0.01")
    sub.add_parser("pilots", help="print the pilots' numbers against the negative control's rule")
    t = sub.add_parser("table", help="print the regime table (docs/regime.md) from the committed data")
    t.add_argument("--figure", default=None, help="also draw the trajectories to this PNG (docs/regime.png)")
    sub.add_parser("docs", help="rewrite docs/regime.md's generated blocks and docs/regime.png from the committed data")
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        print(json.dumps(calibrate(args.base_seed), indent=1))
    elif args.command == "run":
        changes = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.task)}
        changes.update({f"friction.{k}": json.loads(v) for k, v in (kv.split("=", 1) for kv in args.friction)})
        changes.update({"lr": args.lr} if args.lr is not None else {})
        print(run(args.arm, args.base_seed, args.seeds, args.steps, changes=changes))
    elif args.command == "docs":
        from simulations.regime_table import plot, refresh_docs

        page = DOCS / "regime.md"
        page.write_text(refresh_docs(page.read_text(), doc_blocks()))
        plot(load(), DOCS / "regime.png")
        print(f"{page} and regime.png rewritten from {DATA}")
    elif args.command == "pilots":
        from simulations.regime_table import pilot_table

        print(pilot_table(pilots()))
    else:
        from simulations.regime_table import controls, plot, table

        frame = load()
        print(table(frame))
        print()
        print(controls(frame, {name: arm.role for name, arm in ARMS.items()}) if not frame.empty else "")
        if args.figure and not frame.empty:
            plot(frame, args.figure)


if __name__ == "__main__":
    main()

__all__ = ["ARMS", "Arm", "BITS", "DATA", "LONG_LR", "arm_config", "calibrate", "data_path", "doc_blocks", "load",
           "pilots", "run", "with_friction_knobs"]
