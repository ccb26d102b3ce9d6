"""The case file's dated amendments (``amendments`` in ``published_outcomes.yaml``), validated and
applied: the second prediction round (issue 43).

An amendment never rewrites the first round: ``load_cases`` returns the cases as they were judged.
``second_round()`` returns what the round-2 runs read — the first round's cases minus those withdrawn
or moved out of scope, the reclassified and re-specified ones with their new outcome and decision,
each non-inferiority case with its ``plain`` arm, and the amendment's new cases — beside the round's
mapping (``sampler_rounding`` at the calibrated bits, the regime task) and its out-of-scope table.
``check_amendments`` (called by ``load_cases``) fails with one line naming the amendment entry and
key at fault.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass

from simulations.cases import (
    ADDED_STATISTICS,
    OPTIONAL_KEYS,
    STATISTICS,
    Case,
    CaseFile,
    _check_arm,
    _check_case,
    _check_decision,
    _need,
    load_cases,
)

#: every statistic a round-2 case may use
ALL_STATISTICS = {**STATISTICS, **ADDED_STATISTICS}
#: the lists of an amendment that name a first-round case, and the keys each entry needs
CHANGES = {
    "checked": ("read", "by_the_rule"),
    "reclassified": ("figure", "read", "by_the_rule", "outcome"),
    "withdrawn": ("figure", "read", "by_the_rule", "reason"),
    "out_of_scope": ("mechanism", "source", "quote", "reason"),
    "testable_again": ("reason",),
    "respecified": ("why", "outcome"),
    "discrimination": ("why",),
}
FRICTIONS = ("sampler_rounding",)


@dataclass(frozen=True)
class Round:
    """One prediction round after its amendment: its date, mapping, cases, the withdrawn cases
    (with the figure read) and the out-of-scope table (the file's plus the cases moved there)."""

    date: str
    mapping: dict
    cases: tuple[Case, ...]
    withdrawn: tuple[dict, ...]
    out_of_scope: tuple[dict, ...]

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise ValueError(f"no round-2 case {case_id!r}; cases: {[c.id for c in self.cases]}")


def _check_round_mapping(where: str, mapping: dict, first: dict) -> None:
    _need(where, mapping, "rule", str)
    precision = _need(where, mapping, "precision", dict)
    if set(precision) != set(first["precision"]):
        raise ValueError(f"{where}.precision: must map every precision of the first round "
                         f"({sorted(first['precision'])}), got {sorted(precision)}")
    for name, spec in precision.items():
        if spec == {}:
            continue
        if not isinstance(spec, dict) or spec.get("friction") not in FRICTIONS:
            raise ValueError(f"{where}.precision.{name}: must be {{}} or a friction of {FRICTIONS}, got {spec!r}")
        bits = spec.get("mantissa_bits")
        if not (isinstance(bits, float) and 1.0 <= bits <= 52.0):
            raise ValueError(f"{where}.precision.{name}.mantissa_bits: must be a float in [1, 52], got {bits!r}")
    scale = _need(where, mapping, "scale", dict)
    for key in ("task", "answer_len", "steps", "seeds"):
        _need(f"{where}.scale", scale, key, (str, int, list))
    if not (isinstance(mapping.get("n_probe"), int) and mapping["n_probe"] >= 2):
        raise ValueError(f"{where}.n_probe: must be an int ≥ 2, got {mapping.get('n_probe')!r}")


def check_amendments(cf: CaseFile) -> None:
    """Every amendment of ``cf``: dated, its mapping, its definitions of the added statistics and
    keys, each change naming one first-round case once, and its new cases valid by the file's rules."""
    ids = {c.id for c in cf.cases}
    for i, amendment in enumerate(cf.amendments):
        where = f"amendments[{i}]"
        date = _need(where, amendment, "date", (datetime.date, str))
        if isinstance(date, str):
            try:
                datetime.date.fromisoformat(date)
            except ValueError:
                raise ValueError(f"{where}.date: must be an ISO date (YYYY-MM-DD), got {date!r}") from None
        _need(where, amendment, "why", str)
        _check_round_mapping(f"{where}.mapping", _need(where, amendment, "mapping", dict), cf.mapping)
        defined = _need(where, amendment, "statistics", dict)
        needed = set(ADDED_STATISTICS) | {k for keys in OPTIONAL_KEYS.values() for k in keys if k != "direction"}
        missing = sorted(needed - set(defined))
        if missing:
            raise ValueError(f"{where}.statistics: no definition for {missing}")
        seen: dict[str, str] = {}
        for change, keys in CHANGES.items():
            for j, entry in enumerate(amendment.get(change, [])):
                at = f"{where}.{change}[{j}]"
                cid = _need(at, entry, "case", str)
                if cid not in ids:
                    raise ValueError(f"{at}.case: {cid!r} is not a case of the file")
                if cid in seen and "discrimination" not in (seen[cid], change):
                    raise ValueError(f"{at}.case: {cid!r} is already {seen[cid]} by this amendment")
                if change == "discrimination" and seen.get(cid) in ("withdrawn", "out_of_scope"):
                    raise ValueError(f"{at}.case: {cid!r} is {seen[cid]}; it has no round-2 test to pair")
                seen.setdefault(cid, change)
                for key in keys:
                    _need(at, entry, key, str)
        _round(cf, amendment)  # the resulting cases validate by the file's rules


def _round(cf: CaseFile, amendment: dict) -> Round:
    where = f"amendment {amendment['date']}"
    changed = {entry["case"]: (change, entry) for change in CHANGES for entry in amendment.get(change, [])
               if change != "discrimination"}
    plains = {entry["case"]: entry for entry in amendment.get("discrimination", [])}
    gone = {"withdrawn", "out_of_scope"}
    cases = []
    for case in cf.cases:
        change, entry = changed.get(case.id, ("", {}))
        if change in gone:
            continue
        if change in ("reclassified", "respecified"):
            decision = _check_decision(f"{where}.{change}[{case.id}]", _need(where, entry, "decision", dict),
                                       case.arms, ALL_STATISTICS, OPTIONAL_KEYS)
            case = dataclasses.replace(case, outcome=entry["outcome"], decision=decision)
        if case.id in plains:
            at = f"{where}.discrimination[{case.id}]"
            if case.decision["statistic"] != "noninferior":
                raise ValueError(f"{at}: a plain arm pairs a noninferior case, not {case.decision['statistic']}")
            plain = _need(at, plains[case.id], "plain", dict)
            _check_arm(f"{at}.plain", plain, cf.mapping, control=False)
            case = dataclasses.replace(case, arms={**case.arms, "plain": plain},
                                       decision={**case.decision, "plain": "plain"})
        cases.append(case)
    for raw in amendment.get("cases", []):
        cases.append(_check_case(raw, cf.mapping, ALL_STATISTICS, OPTIONAL_KEYS))
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{where}.cases: duplicate case id(s) {duplicates}")
    unpaired = [c.id for c in cases if c.decision["statistic"] == "noninferior" and "plain" not in c.decision]
    if unpaired:
        raise ValueError(f"{where}: every noninferior case needs a plain arm that must fail the same test; "
                         f"none for {unpaired}")
    moved = tuple({k: e[k] for k in ("case", "mechanism", "source", "quote", "reason")}
                  for e in amendment.get("out_of_scope", []))
    return Round(str(amendment["date"]), amendment["mapping"], tuple(cases), tuple(amendment.get("withdrawn", [])),
                 cf.out_of_scope + moved)


#: the second round's lr, as its amendment declares it (published_outcomes.yaml, point 4')
ROUND2_LR = 3e-5


def round_config(rnd: Round, case: Case, arm: str, seed: int = 0, population: int | None = None):
    """The ``RunConfig`` of one arm of a round-2 case on the regime, by the round's mapping: the
    regime task and its optimiser recipe (``simulations.regime.regime_config``), the arm's loss
    fields (their controllers after the recipe's gradient clip), the lag as a delay schedule, the
    precision as ``sampler_rounding`` at the calibrated bits, the published group size, the round's
    steps (at least 4·D, the first round's point 6); ``population`` (default: the round's seeds) batches seeds ``seed`` … as members."""
    from sandbox.tasks.regime import RECIPE
    from simulations.cases import loss_fields, staleness_of
    from simulations.regime import regime_config

    spec, mapping = case.arms[arm], rnd.mapping
    fields = loss_fields(spec["loss"], load_cases().mapping)
    fields["controllers"] = tuple(RECIPE["controllers"]) + tuple(fields.get("controllers", ()))
    precision = dict(mapping["precision"][spec.get("precision", "none")])
    frictions = ((precision.pop("friction"), precision),) if precision else ()
    scale = mapping["scale"]
    task_kwargs = {"answer_len": scale["answer_len"], "population": population or len(scale["seeds"])}
    if case.group_size:
        task_kwargs["samples_per_prompt"] = case.group_size
    d_probe = load_cases().mapping["d_probe"]
    lags = [staleness_of(a.get("lag"), d_probe).get("D", 0) for a in case.arms.values()]
    # the amendment's text (point 4') fixes the lr at 3e-5, the regime's at the time; the regime's own
    # default has moved since (docs/regime.md, third round), so the round states it, as it was declared
    fields.setdefault("lr", float(scale.get("lr", ROUND2_LR)))
    return regime_config(task_kwargs=task_kwargs, **fields, frictions=frictions,
                         staleness=staleness_of(spec.get("lag"), d_probe), seed=seed, label=f"round2/{case.id}/{arm}",
                         steps=max(int(scale["steps"]), 4 * max(lags)))  # the first round's point 6


def second_round(cf: CaseFile | None = None) -> Round:
    """The second prediction round: the file's round-2 amendment applied (module docstring)."""
    cf = cf or load_cases()
    for amendment in cf.amendments:
        if amendment.get("round") == 2:
            return _round(cf, amendment)
    raise ValueError("the case file has no amendment with round: 2")


__all__ = ["ALL_STATISTICS", "CHANGES", "Round", "check_amendments", "round_config", "second_round"]
