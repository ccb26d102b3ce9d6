"""The third amendment (issue 43, part 2): the round-2 cases read as curves along the lr on the
matched regime (``curves.yaml``, committed before its runs; docs/predictions.md, "Curves").

Each arm of a case runs at every lr of the grid (the round-2 mapping at the regime's current warm
start and calibrated bits; 8 seeds batched). A seed's **critical lr** is the smallest grid lr at
which its error curve collapses by the case file's rule; a case **agrees** when its worse arm's
critical lr is below its better arm's in significantly more seeds than the reverse (one-sided exact
sign test over seeds, ties dropped). The regime's ``control`` (negative: must not collapse from the
lr alone) and ``lag16-seq-is`` (positive: must collapse somewhere on the grid) run along the same grid.

    python -m simulations.cases.curves_report plan       # every (arm, lr) in run order, done or not
    python -m simulations.cases.curves_report run --next 3   # run the next 3 points not yet on disk
    python -m simulations.cases.curves_report report     # the tables (docs/predictions.md) and docs/curves.png
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

HERE = Path(__file__).parent
DECLARATION = HERE / "curves.yaml"
DATA = HERE.parent / "data" / "regime" / "curves"
#: the order statistics of 8 seeds bounding the median's exact interval (coverage 93.0%)
MEDIAN_CI_RANKS = {8: (2, 7)}


@dataclass(frozen=True)
class Point:
    """One run of the curves: an arm (its file key and how to build it) at one lr."""

    key: str
    lr: float
    case: str | None  # None: a regime control (``simulations.regime_runs.ARMS``)
    arm: str
    base_seed: int = 0  # 0: the declared curves (mapping.base_seed); 1: their confirmation

    @property
    def path(self) -> Path:
        return DATA / f"{self.key}-lr{self.lr:g}-b{self.base_seed}.parquet"


@cache
def declaration() -> dict:
    """``curves.yaml``, checked (``check``)."""
    return check(yaml.safe_load(DECLARATION.read_text()))


def check(data: dict) -> dict:
    """A curves declaration: the grid positive floats, the run order the grid, every round-2 case a
    curve or in ``not_curves`` once, each curve's arms arms of its case; one line naming the key at fault."""
    from simulations.cases.amendments import second_round

    grid = data["knob"]["grid"]
    if not grid or any(not (isinstance(x, float) and x > 0) for x in grid):
        raise ValueError(f"curves.yaml knob.grid: must be positive floats, got {grid!r}")
    alpha = data["rules"].get("alpha")
    if not (isinstance(alpha, float) and 0 < alpha < 1):
        raise ValueError(f"curves.yaml rules.alpha: must be a float in (0, 1), got {alpha!r}")
    if sorted(data["knob"]["run_order"]) != sorted(grid):
        raise ValueError("curves.yaml knob.run_order: must be the grid in some order")
    conf = data.get("confirmation")
    if conf is not None:
        base, other = data["mapping"]["base_seed"], conf["base_seed"]
        blocks = [(int(b), float(lr)) for b, lr in conf["blocks"]]
        if other == base or sorted(blocks) != sorted((b, lr) for b in (base, other) for lr in grid):
            raise ValueError(f"curves.yaml confirmation.blocks: must be every (base seed, lr) of base seeds "
                             f"{base} and {other} (another base seed) over the grid once, got {conf['blocks']!r}")
        if [lr for b, lr in blocks if b == base] != [float(x) for x in data["knob"]["run_order"]]:
            raise ValueError("curves.yaml confirmation.blocks: base seed 0's lrs must keep knob.run_order")
        unknown = set(conf["cases"]) - {c["case"] for c in data["cases"]}
        if unknown:
            raise ValueError(f"curves.yaml confirmation.cases: {sorted(unknown)} are not curves (cases)")
    r2 = second_round()
    listed = [c["case"] for c in data["cases"]] + [c["case"] for c in data["not_curves"]]
    if sorted(listed) != sorted(c.id for c in r2.cases):
        differs = sorted({c.id for c in r2.cases} ^ set(listed)) or sorted({i for i in listed if listed.count(i) > 1})
        raise ValueError(f"curves.yaml: every round-2 case must be a curve or in not_curves, once; differs at {differs}")
    for entry in data["cases"]:
        case = r2.case(entry["case"])
        for side in ("worse", "better"):
            if entry[side] not in case.arms:
                raise ValueError(f"curves.yaml cases[{case.id}].{side}: {entry[side]!r} is not an arm of the case")
    return data


def arm_key(case, arm: str) -> str:
    """A file key naming what an arm runs (loss, delay, precision, group size): arms of different
    cases that run the same thing share their runs."""
    from sandbox.tasks.regime import RegimeTask
    from simulations.cases import load_cases, staleness_of

    spec = case.arms[arm]
    lag = staleness_of(spec.get("lag"), load_cases().mapping["d_probe"])
    parts = [spec["loss"]]
    if lag:
        parts.append(f"D{lag['D']}{lag['kind'][0]}")
    if spec.get("precision", "none") != "none":
        parts.append(spec["precision"])
    if case.group_size and case.group_size != RegimeTask.samples_per_prompt:  # the regime's own 8 unnamed
        parts.append(f"g{case.group_size}")
    return "-".join(parts)


def points() -> list[Point]:
    """Every run of the declaration, in run order: by (base seed, lr) block (``confirmation.blocks``,
    else base seed 0 by ``run_order``), the controls first, then the cases' arms in their order (at
    the confirming base seed only the confirmed cases'); an arm shared by cases once."""
    from simulations.cases.amendments import second_round

    d, r2 = declaration(), second_round()
    base, conf = d["mapping"]["base_seed"], d.get("confirmation")
    blocks = conf["blocks"] if conf else [(base, lr) for lr in d["knob"]["run_order"]]
    arms: dict[int, dict[str, tuple[str | None, str]]] = {}
    for seed, listed in ((base, None), *(((conf["base_seed"], set(conf["cases"])),) if conf else ())):
        arms[seed] = {name: (None, name) for name in d["controls"].values()}
        for entry in d["cases"]:
            if listed is None or entry["case"] in listed:
                case = r2.case(entry["case"])
                for side in ("worse", "better"):
                    arms[seed].setdefault(arm_key(case, entry[side]), (case.id, entry[side]))
        for case in diagnosed():  # the confirmed cases' own control arms (``confirmation.diagnostic``)
            arms[seed].setdefault(arm_key(case, "control"), (case.id, "control"))
    return [Point(key, float(lr), case, arm, int(seed))
            for seed, lr in blocks for key, (case, arm) in arms[int(seed)].items()]


def diagnosed() -> list:
    """The confirmed cases (``confirmation.cases``), whose own control arms run as a diagnostic."""
    from simulations.cases.amendments import second_round

    conf = declaration().get("confirmation") or {}
    return [second_round().case(c) for c in conf.get("cases", [])] if conf.get("diagnostic") else []


def config_of(point: Point):
    """The ``RunConfig`` of one point (module docstring)."""
    from simulations.cases.amendments import round_config, second_round
    from simulations.regime_runs import ARMS, arm_config

    d = declaration()
    scale, base = d["mapping"]["scale"], point.base_seed
    if point.case is None:
        arm = dataclasses.replace(ARMS[point.arm], lr=point.lr, steps=scale["steps"])
        return arm_config(arm, base, len(scale["seeds"]), answer_len=scale["answer_len"])
    r2 = second_round()
    rnd = dataclasses.replace(r2, mapping={**r2.mapping, "precision": d["mapping"]["precision"],
                                           "scale": {**scale, "lr": point.lr}})
    config = round_config(rnd, r2.case(point.case), point.arm, seed=base, population=len(scale["seeds"]))
    return dataclasses.replace(config, label=f"curves/{point.key}/lr{point.lr:g}")


def run(point: Point) -> Path:
    """Probe one point and write its trajectories atomically, stamped with the commit that made them."""
    from sandbox.analysis.provenance import git_commit
    from simulations.regime import probe

    commit = git_commit()
    frame = probe(config_of(point), every=10)
    frame["key"], frame["lr"], frame["base_seed"], frame["commit"] = point.key, point.lr, point.base_seed, commit
    point.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = point.path.with_name(f".{point.path.name}.tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(point.path)
    return point.path


# ---------------------------------------------------------------------------------------------
# Reading the curves (rules: curves.yaml)


def collapsed_seeds(frame: pd.DataFrame) -> pd.Series:
    """Per member: whether its error curve collapses by the case file's rule (``collapse_event``;
    NaN errors count as worst)."""
    from sandbox.analysis.collapse import collapse_event

    ev = frame.dropna(subset=["error"]).sort_values("step")  # a diverged seed's curve stops: worst to the budget
    out = {}
    for member, rows in ev.groupby("member"):
        steps = rows["step"].to_numpy()
        err = rows["error"].to_numpy(dtype=float)
        out[int(member)] = collapse_event(steps, err, budget=int(frame["step"].max())).collapsed
    return pd.Series(out).sort_index()


def critical_lr(by_lr: dict[float, pd.Series]) -> pd.Series:
    """Per seed: the smallest lr whose ``collapsed_seeds`` is True (inf when none)."""
    lrs = sorted(by_lr)
    seeds = by_lr[lrs[0]].index
    return pd.Series({s: next((lr for lr in lrs if by_lr[lr].get(s, False)), math.inf) for s in seeds}).sort_index()


def median_interval(values) -> tuple[float, float, float]:
    """The median and its exact distribution-free interval from order statistics (8 seeds: (x(2),
    x(7)), 93.0%); NaN bounds at other seed counts."""
    x = np.sort(np.asarray(values, dtype=float))
    lo, hi = MEDIAN_CI_RANKS.get(len(x), (None, None))
    return float(np.median(x)), (float(x[lo - 1]) if lo else math.nan), (float(x[hi - 1]) if hi else math.nan)


def sign_test(worse: pd.Series, better: pd.Series, alpha: float) -> dict:
    """The ordering rule: n+ seeds with worse's critical lr below better's, n- above; one-sided exact
    sign tests both ways; the verdict."""
    pairs = pd.concat([worse, better], axis=1, keys=["w", "b"]).dropna()
    n_plus, n_minus = int((pairs.w < pairs.b).sum()), int((pairs.w > pairs.b).sum())
    n = n_plus + n_minus
    p_fwd = float(stats.binomtest(n_plus, n, 0.5, alternative="greater").pvalue) if n else 1.0
    p_rev = float(stats.binomtest(n_minus, n, 0.5, alternative="greater").pvalue) if n else 1.0
    if np.isinf(pairs.to_numpy()).all():
        verdict = "not reproduced: no collapse on the grid"
    else:
        verdict = "agree" if p_fwd < alpha else "opposite" if p_rev < alpha else "not reproduced"
    return {"n_plus": n_plus, "n_minus": n_minus, "ties": len(pairs) - n, "p_forward": p_fwd, "p_reverse": p_rev,
            "verdict": verdict}


def load(base_seed: int = 0) -> dict[tuple[str, float], pd.DataFrame]:
    """Every committed point's trajectories at ``base_seed``, by (key, lr) (the base seed is in the
    file's name: ``Point.path``)."""
    return {(f["key"].iloc[0], float(f["lr"].iloc[0])): f
            for f in (pd.read_parquet(p) for p in sorted(DATA.glob(f"*-b{base_seed}.parquet")))}


__all__ = ["DATA", "DECLARATION", "Point", "arm_key", "check", "collapsed_seeds", "config_of", "critical_lr", "declaration",
           "diagnosed",
           "load", "median_interval", "points", "run", "sign_test"]
