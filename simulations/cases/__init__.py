"""Published large-run outcomes as sandbox experiments (issue 32): the case file
``published_outcomes.yaml``, validated, and its one mapping rule applied.

``load_cases()`` reads and checks the file (one ``ValueError`` line naming the case and the key at
fault); ``case_configs(case, fidelity)`` turns a case's arms — written in published terms (a loss
name, a lag, a precision) — into ``RunConfig``s by the file's ``mapping``, once for every case:
the loss becomes its registry fields (``sandbox.methods`` recipes expanded), the lag a delay
schedule, the precision the ``measured_mismatch`` friction, the scale the task and its knobs, and
the budget max(the scale's steps, 4·D). ``scale_runs`` says which arms and seeds a case runs at each
scale of a fidelity (the amended ``fidelity``: only the control at a ``control_only`` scale, nothing
beyond ``max_steps``); ``batched_configs`` gives each arm's seeds as one batched population. The
decision rules are declared in the file and executed by ``simulations.cases.verdicts``. The file's
dated ``amendments`` (the second round, issue 43) are validated here and applied by
``simulations.cases.amendments.second_round``; ``load_cases`` itself returns the first round's cases
unchanged.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CASES_FILE = Path(__file__).with_name("published_outcomes.yaml")
#: what every case states of the published setting ("unknown" where the source does not say)
SETTING_KEYS = ("model", "staleness", "sampler_precision", "trainer_precision", "loss", "correction", "caps",
                "top_p", "top_k", "group_size", "lr")
LAG_KINDS = ("fixed", "max", "minibatch", "high")
#: each statistic and the decision keys it needs besides ``statistic``
STATISTICS = {
    "collapse_contrast": ("worse", "better"),
    "final_contrast": ("worse", "better"),
    "prosperity_contrast": ("worse", "better"),
    "signal_rise": ("worse", "signal", "direction", "factor"),
    "signal_level": ("worse", "signal"),
    "noninferior": ("arm",),
}
#: the statistics the second amendment adds (its ``statistics`` block defines them)
ADDED_STATISTICS = {
    "signal_trend": ("worse", "signal", "factor"),
    "signal_lead": ("worse", "signal", "lagging", "factor"),
}
#: decision keys a statistic may set besides its required ones (the second amendment's ``statistics``)
OPTIONAL_KEYS = {
    "collapse_contrast": ("event",),
    "signal_rise": ("event",),
    "signal_lead": ("event",),
    "signal_level": ("against", "direction", "min_live"),
    "noninferior": ("plain",),
}
EVENTS = ("collapse", "dip")
#: the logged metric columns a signal statistic may read (sandbox.diagnostics.SIGNALS)
SIGNAL_COLUMNS = ("ess_frac", "kl_k1", "kl_k3", "log_ratio_abs_mean", "log_ratio_abs_max", "grad_norm",
                  "cos_consecutive", "entropy", "clip_frac", "mask_frac")
MECHANISMS = ("staleness", "mismatch")


@dataclass(frozen=True)
class Case:
    """One published outcome: its id, source, quote, setting, outcome, mechanism, arms (published
    terms), group size (None: the mapping's default), decision and deviations."""

    id: str
    source: dict
    quote: str
    published: dict
    outcome: str
    mechanism: str
    arms: dict
    group_size: int | None
    decision: dict
    deviations: tuple[str, ...]


@dataclass(frozen=True)
class CaseFile:
    """The whole file: the mapping (rule, tables, scales, fidelities, statistics), the cases and the
    mechanisms declared out of scope."""

    mapping: dict
    cases: tuple[Case, ...]
    out_of_scope: tuple[dict, ...]
    amendments: tuple[dict, ...] = ()

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise ValueError(f"no case {case_id!r}; cases: {[c.id for c in self.cases]}")


def _need(where: str, data: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise ValueError(f"{where}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValueError(f"{where}.{key}: must be a {names}, got {type(value).__name__} {value!r}")
    return value


def _check_mapping(mapping: dict) -> None:
    for key, kind in (("rule", str), ("d_probe", int), ("precision", dict), ("losses", dict), ("scales", dict),
                      ("fidelity", dict), ("metric", str), ("alpha", float), ("verdicts", str), ("statistics", dict)):
        _need("mapping", mapping, key, kind)
    for name, kl in mapping["precision"].items():
        if not isinstance(kl, float) or not 0.0 <= kl <= 1.0:
            raise ValueError(f"mapping.precision.{name}: must be a token KL in [0, 1], got {kl!r}")
    for name, loss in mapping["losses"].items():
        if not isinstance(loss, dict) or not ({"estimator", "recipe"} & set(loss)):
            raise ValueError(f"mapping.losses.{name}: must name an estimator or a recipe, got {loss!r}")
    for name, scale in mapping["scales"].items():
        _need(f"mapping.scales.{name}", scale, "task", str)
        _need(f"mapping.scales.{name}", scale, "task_kwargs", dict)
    for name, fid in mapping["fidelity"].items():
        where = f"mapping.fidelity.{name}"
        for key, kind in (("scales", list), ("steps", dict), ("seeds", list), ("eval", dict), ("log_points", int)):
            _need(where, fid, key, kind)
        for scale in fid["scales"]:
            if scale not in mapping["scales"] or scale not in fid["steps"]:
                raise ValueError(f"{where}: scale {scale!r} needs an entry in mapping.scales and in its steps")
        _check_seeds(where, fid["seeds"], fid.get("batched", False))
        for scale, ev in fid.get("eval_by_scale", {}).items():
            if scale not in fid["scales"] or not isinstance(ev, dict):
                raise ValueError(f"{where}.eval_by_scale.{scale}: must be a scale of this fidelity ({fid['scales']}) "
                                 f"mapped to its evaluation settings, got {ev!r}")
        if "max_steps" in fid and not (isinstance(fid["max_steps"], int) and fid["max_steps"] >= 1):
            raise ValueError(f"{where}.max_steps: must be an int ≥ 1, got {fid['max_steps']!r}")
        if "control_only" in fid:
            only = fid["control_only"]
            for key, kind in (("scales", list), ("seeds", list), ("max_steps", int), ("log_points", int)):
                _need(f"{where}.control_only", only, key, kind)
            stray = [s for s in only["scales"] if s not in fid["scales"]]
            if stray:
                raise ValueError(f"{where}.control_only.scales: {stray} are not scales of this fidelity ({fid['scales']})")
            _check_seeds(f"{where}.control_only", only["seeds"], fid.get("batched", False))
    missing = set(STATISTICS) - set(mapping["statistics"])
    if missing:
        raise ValueError(f"mapping.statistics: no definition for {sorted(missing)}")


def _check_seeds(where: str, seeds: list, batched: bool) -> None:
    if not seeds or not all(isinstance(k, int) and k >= 0 for k in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"{where}.seeds: must be distinct ints ≥ 0, got {seeds!r}")
    if batched and list(seeds) != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(f"{where}.seeds: a batched population's seeds are consecutive (member m is seed "
                         f"seeds[0] + m), got {seeds!r}")


def _check_case(raw: dict, mapping: dict, statistics: dict | None = None, optional: dict | None = None) -> Case:
    """One case of the file, validated; ``statistics`` and ``optional`` (the decision keys each may
    add) default to the first round's, which adds none."""
    where = f"case {raw.get('id', '?')!r}"
    cid = _need(where, raw, "id", str)
    source = _need(where, raw, "source", dict)
    if not ({"repo", "url"} & set(source)):
        raise ValueError(f"{where}.source: must name a repo (with its path) or a url")
    if "repo" in source and "path" not in source:
        raise ValueError(f"{where}.source: a repo needs the path of its figure, table or doc")
    quote = _need(where, raw, "quote", str)
    if len(quote.strip()) < 20:
        raise ValueError(f"{where}.quote: quote the sentence relied on, verbatim (got {quote!r})")
    published = _need(where, raw, "published", dict)
    missing = [k for k in SETTING_KEYS if k not in published]
    if missing:
        raise ValueError(f"{where}.published: state {missing} ('unknown' where the source does not say)")
    outcome = _need(where, raw, "outcome", str)
    mechanism = _need(where, raw, "mechanism", str)
    if mechanism not in MECHANISMS:
        raise ValueError(f"{where}.mechanism: must be one of {MECHANISMS}, got {mechanism!r}")
    experiment = _need(where, raw, "experiment", dict)
    arms = _need(f"{where}.experiment", experiment, "arms", dict)
    if "control" not in arms:
        raise ValueError(f"{where}.experiment.arms: every case needs its on-policy control arm 'control'")
    for name, arm in arms.items():
        _check_arm(f"{where}.experiment.arms.{name}", arm, mapping, control=name == "control")
    group = experiment.get("group_size")
    if group is not None and (not isinstance(group, int) or group < 2):
        raise ValueError(f"{where}.experiment.group_size: must be an int ≥ 2, got {group!r}")
    decision = _check_decision(where, _need(where, raw, "decision", dict), arms, statistics, optional)
    deviations = raw.get("deviations", [])
    if not isinstance(deviations, list) or not all(isinstance(d, str) for d in deviations):
        raise ValueError(f"{where}.deviations: must be a list of sentences")
    return Case(cid, source, quote, published, outcome, mechanism, arms, group, decision, tuple(deviations))


def _check_decision(where: str, decision: dict, arms: dict, statistics: dict | None = None,
                    optional: dict | None = None) -> dict:
    """A case's decision: its statistic, the keys it needs, and the optional keys it may set."""
    statistics, optional = statistics or STATISTICS, optional or {}
    statistic = _need(f"{where}.decision", decision, "statistic", str)
    if statistic not in statistics:
        raise ValueError(f"{where}.decision.statistic: must be one of {sorted(statistics)}, got {statistic!r}")
    for key in statistics[statistic]:
        _need(f"{where}.decision", decision, key, (str, float, int))
    stray = set(decision) - {"statistic", *statistics[statistic], *optional.get(statistic, ())}
    if stray:
        raise ValueError(f"{where}.decision: key(s) {sorted(stray)} not defined for {statistic} "
                         f"(optional: {list(optional.get(statistic, ()))})")
    for key in ("worse", "better", "arm", "against", "plain"):
        if key in decision and decision[key] not in arms:
            raise ValueError(f"{where}.decision.{key}: {decision[key]!r} is not an arm ({sorted(arms)})")
    for key in ("signal", "lagging"):
        if key in decision and decision[key] not in SIGNAL_COLUMNS:
            raise ValueError(f"{where}.decision.{key}: must be one of {SIGNAL_COLUMNS}, got {decision[key]!r}")
    if "direction" in decision and decision["direction"] not in ("up", "down"):
        raise ValueError(f"{where}.decision.direction: must be 'up' or 'down', got {decision['direction']!r}")
    if "factor" in decision and not (isinstance(decision["factor"], float) and decision["factor"] >= 1.0):
        raise ValueError(f"{where}.decision.factor: must be a float ≥ 1, got {decision['factor']!r}")
    if "event" in decision and decision["event"] not in EVENTS:
        raise ValueError(f"{where}.decision.event: must be one of {EVENTS}, got {decision['event']!r}")
    if "min_live" in decision and not (isinstance(decision["min_live"], float) and 0 < decision["min_live"] <= 1):
        raise ValueError(f"{where}.decision.min_live: must be a float in (0, 1], got {decision['min_live']!r}")
    return decision


def _check_arm(where: str, arm: Any, mapping: dict, control: bool) -> None:
    if not isinstance(arm, dict):
        raise ValueError(f"{where}: must be a mapping of loss, lag, precision, got {arm!r}")
    unknown = set(arm) - {"loss", "lag", "precision"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; valid: loss, lag, precision")
    loss = _need(where, arm, "loss", str)
    if loss not in mapping["losses"]:
        raise ValueError(f"{where}.loss: {loss!r} is not in mapping.losses ({sorted(mapping['losses'])})")
    if "precision" in arm and arm["precision"] not in mapping["precision"]:
        raise ValueError(f"{where}.precision: must be one of {sorted(mapping['precision'])}, got {arm['precision']!r}")
    if "lag" in arm:
        lag = arm["lag"]
        kind = _need(f"{where}.lag", lag, "kind", str)
        if kind not in LAG_KINDS:
            raise ValueError(f"{where}.lag.kind: must be one of {LAG_KINDS}, got {kind!r}")
        if kind in ("fixed", "max") and not (isinstance(lag.get("k"), int) and lag["k"] >= 1):
            raise ValueError(f"{where}.lag.k: a {kind} lag needs k, an int ≥ 1, got {lag.get('k')!r}")
        if kind == "minibatch" and not (isinstance(lag.get("n"), int) and lag["n"] >= 2):
            raise ValueError(f"{where}.lag.n: a minibatch lag needs n ≥ 2 updates per rollout batch, got {lag.get('n')!r}")
    if control and ("lag" in arm or mapping["precision"].get(arm.get("precision", "none"), 0.0) > 0):
        raise ValueError(f"{where}: the control is on-policy: no lag and no mismatch")


@functools.lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, size: int) -> Any:
    """The YAML at ``path`` as it was at (``mtime_ns``, ``size``): parsed once per process (a figure's
    notebook asks for the case file once per job; pure-Python YAML took 0.3 s a time)."""
    with open(path) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml where built in


def load_cases(path: str | Path = CASES_FILE) -> CaseFile:
    """The case file at ``path``, validated (module docstring)."""
    stat = Path(path).stat()
    data = copy.deepcopy(_parsed(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size))  # callers may edit it
    mapping = _need("case file", data, "mapping", dict)
    _check_mapping(mapping)
    raw_cases = _need("case file", data, "cases", list)
    cases = tuple(_check_case(raw, mapping) for raw in raw_cases)
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"case file: duplicate case id(s) {duplicates}")
    out = _need("case file", data, "out_of_scope", list)
    for i, entry in enumerate(out):
        for key in ("mechanism", "source", "quote", "reason"):
            _need(f"out_of_scope[{i}]", entry, key, str)
    amendments = data.get("amendments", [])
    if not isinstance(amendments, list):
        raise ValueError(f"case file.amendments: must be a list of dated amendments, got {type(amendments).__name__}")
    cf = CaseFile(mapping, cases, tuple(out), tuple(amendments))
    from simulations.cases.amendments import check_amendments

    check_amendments(cf)
    return cf


# ---------------------------------------------------------------------------- the mapping rule
def staleness_of(lag: dict | None, d_probe: int) -> dict:
    """The delay schedule of a published lag (the rule's point 1): fixed k → fixed D = k; maximum k
    → uniform D = k; n updates per rollout batch → uniform D = n − 1; unstated "high" → uniform
    D = ``d_probe``; none → synchronous."""
    if not lag:
        return {}
    kind = lag["kind"]
    if kind == "fixed":
        return {"kind": "fixed", "D": lag["k"]}
    if kind == "max":
        return {"kind": "uniform", "D": lag["k"]}
    if kind == "minibatch":
        return {"kind": "uniform", "D": lag["n"] - 1}
    return {"kind": "uniform", "D": d_probe}


def max_delay(case: Case, mapping: dict) -> int:
    """The largest D of the case's arms."""
    return max((staleness_of(arm.get("lag"), mapping["d_probe"]).get("D", 0) for arm in case.arms.values()), default=0)


def steps_of(case: Case, mapping: dict, fidelity: str, scale: str) -> int:
    """The budget of the rule's point 6: max(the scale's steps at ``fidelity``, 4·D)."""
    return max(int(mapping["fidelity"][fidelity]["steps"][scale]), 4 * max_delay(case, mapping))


def loss_fields(name: str, mapping: dict) -> dict:
    """RunConfig fields of a published loss (``mapping.losses``), a recipe of ``sandbox.methods``
    expanded and overridden by the entry's own fields."""
    from sandbox.methods import RECIPES

    entry = copy.deepcopy(mapping["losses"][name])
    recipe = entry.pop("recipe", None)
    fields = copy.deepcopy(RECIPES[recipe]) if recipe is not None else {}
    fields.update(entry)
    fields["controllers"] = tuple((c, dict(kw)) for c, kw in fields.get("controllers", ()))
    return fields


@dataclass(frozen=True)
class ScaleRuns:
    """What a case runs at one scale of a fidelity: its arms, seeds and log points — or, when it
    is not run there, why (``skipped``)."""

    arms: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    log_points: int = 0
    skipped: str = ""


def scale_runs(case: Case, mapping: dict, fidelity: str) -> dict[str, ScaleRuns]:
    """{scale: ScaleRuns} for every scale of ``fidelity``, by its settings (the file's
    ``fidelity``): a case whose budget exceeds ``max_steps`` is not run; at a ``control_only``
    scale only the control runs, with that block's seeds and log points."""
    if fidelity not in mapping["fidelity"]:
        raise ValueError(f"fidelity must be one of {sorted(mapping['fidelity'])}, got {fidelity!r}")
    fid = mapping["fidelity"][fidelity]
    only = fid.get("control_only", {})
    out = {}
    for scale in fid["scales"]:
        steps = steps_of(case, mapping, fidelity, scale)
        block = only if scale in only.get("scales", ()) else fid
        cap = block.get("max_steps")
        if cap is not None and steps > cap:
            out[scale] = ScaleRuns(skipped=f"not run at {fidelity} fidelity: its budget of {steps} steps exceeds "
                                           f"the {cap} this fidelity runs at the {scale} scale")
            continue
        arms = ("control",) if block is only else tuple(case.arms)
        out[scale] = ScaleRuns(arms, tuple(block["seeds"]), int(block["log_points"]))
    return out


def arm_config(case: Case, arm: str, mapping: dict, fidelity: str, scale: str, seed: int, population: int = 1):
    """The ``RunConfig`` of one arm of ``case`` at ``scale`` and ``fidelity`` for ``seed`` (with
    ``population`` > 1: the batched run whose member m is seed ``seed`` + m)."""
    from sandbox.runtime.config import RunConfig

    spec = case.arms[arm]
    fid = mapping["fidelity"][fidelity]
    task = mapping["scales"][scale]
    evaluation = fid.get("eval_by_scale", {}).get(scale, fid["eval"])
    task_kwargs = {**task["task_kwargs"], **evaluation, "samples_per_prompt": case.group_size or 8,
                   "prompts_per_step": 10}
    if population > 1:
        task_kwargs["population"] = population
    kl = mapping["precision"][spec.get("precision", "none")]
    frictions = (("measured_mismatch", {"token_kl": kl}),) if kl > 0 else ()
    runs = scale_runs(case, mapping, fidelity).get(scale)
    log_points = runs.log_points if runs is not None and not runs.skipped else fid["log_points"]
    return RunConfig(task=task["task"], task_kwargs=task_kwargs, **loss_fields(spec["loss"], mapping),
                     staleness=staleness_of(spec.get("lag"), mapping["d_probe"]), frictions=frictions, seed=seed,
                     steps=steps_of(case, mapping, fidelity, scale), log_points=log_points,
                     label=f"{case.id}/{arm}/{scale}")


def case_configs(case: Case, mapping: dict, fidelity: str) -> dict[tuple[str, str, int], Any]:
    """Every run of ``case`` at ``fidelity``, one per seed: {(arm, scale, seed): RunConfig}
    (``scale_runs`` says which arms and seeds run at each scale)."""
    return {(arm, scale, seed): arm_config(case, arm, mapping, fidelity, scale, seed)
            for scale, runs in scale_runs(case, mapping, fidelity).items() for arm in runs.arms for seed in runs.seeds}


def batched_configs(case: Case, mapping: dict, fidelity: str) -> dict[tuple[str, str], Any]:
    """Every run of ``case`` at ``fidelity`` with each arm's seeds as one batched population:
    {(arm, scale): RunConfig} whose member m is seed seeds[0] + m (the fidelity's ``batched``)."""
    return {(arm, scale): arm_config(case, arm, mapping, fidelity, scale, runs.seeds[0], len(runs.seeds))
            for scale, runs in scale_runs(case, mapping, fidelity).items() for arm in runs.arms}


__all__ = ["ADDED_STATISTICS", "CASES_FILE", "EVENTS", "LAG_KINDS", "OPTIONAL_KEYS", "SETTING_KEYS", "SIGNAL_COLUMNS", "STATISTICS", "Case", "CaseFile", "ScaleRuns",
           "arm_config", "batched_configs", "case_configs", "load_cases", "loss_fields", "max_delay", "scale_runs",
           "staleness_of", "steps_of"]
