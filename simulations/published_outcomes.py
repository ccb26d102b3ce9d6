"""published-outcomes: does the sandbox's verdict go the way published large runs went? (issue 32)

Every case of ``simulations/cases/published_outcomes.yaml`` — a published outcome, its setting,
its sandbox experiment by the file's one mapping rule and its decision rule, all committed before
any run — is run at the scales of the figure's fidelity (the file's ``fidelity``; 'full' is
'paper') and judged by its declared rule (``simulations.cases.verdicts``). One claim row per case,
declared by the file before its data: at paper fidelity an agreement PASSes, a disagreement
(the opposite, or not reproduced) FAILs with its cause, and an inconclusive case (its on-policy
control did not learn, or collapsed) is INFO with the reason. Quick fidelity is the file's smoke
test: every row is reported, none counted. At the 256-token scales only the controls run (the
file's amendment): one INFO row per distinct control says whether it learns there.

The agreement rate is agree / conclusive with its exact Clopper–Pearson interval (INFO: no rate
was declared to test).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sandbox.analysis.claims import ClaimBook
from sandbox.analysis.stats import Interval
from sandbox.core.validation import check_choice
from simulations import FIDELITIES, Figure, Plan, register_figure
from simulations.cases import batched_configs, case_configs, load_cases
from simulations.cases.outcomes import CASE_FIDELITY, CaseResult, agreement, case_tokens, judge_case
from simulations.sequences import _job

FIGURE = "published-outcomes"
SCALE_ORDER = ("reference", "long", "long_vocab")


def plan(fidelity: str) -> Plan:
    """One (tags, jobs) entry per (case, arm, scale): a batched job of the arm's seeds (or one job
    per seed), tagged with case, arm and scale; a run two cases share is one job. Smallest scale
    first, so that a partial run finishes the reference scale before the 256-token controls."""
    check_choice("fidelity", fidelity, FIDELITIES)
    cf = load_cases()
    fid = CASE_FIDELITY[fidelity]
    out = []
    for case in cf.cases:
        if cf.mapping["fidelity"][fid].get("batched", False):
            runs = {k: [cfg] for k, cfg in batched_configs(case, cf.mapping, fid).items()}
        else:
            runs: dict = {}
            for (arm, scale, _seed), cfg in case_configs(case, cf.mapping, fid).items():
                runs.setdefault((arm, scale), []).append(cfg)
        for (arm, scale), configs in runs.items():
            out.append(({"case": case.id, "arm": arm, "scale": scale}, [_job(c, {}) for c in configs]))
    return sorted(out, key=lambda entry: SCALE_ORDER.index(entry[0]["scale"]))


def results_by_case(frame: pd.DataFrame, fidelity: str) -> list[CaseResult]:
    """Every case at every scale of ``fidelity``, in the file's order, smallest scale first."""
    cf = load_cases()
    return [r for case in cf.cases for r in judge_case(cf, case, frame, fidelity)]


def _control_rows(book: ClaimBook, results: list[CaseResult]) -> None:
    """One INFO row per distinct control at a control-only scale (its loss and group: no lag, no
    mismatch, the scale's budget): its best gain per seed, as a fraction of the way to perfect."""
    seen: dict[tuple, list[CaseResult]] = {}
    for r in results:
        if r.scale != "reference" and r.values:
            seen.setdefault((r.scale, r.case.arms["control"]["loss"], r.case.group_size or 8), []).append(r)
    for (scale, loss, group), rs in seen.items():
        book.measure(f"control-{loss}-g{group}-{scale}",
                     f"the on-policy control {loss} (groups of {group}) at {case_tokens(scale)} answer tokens ({scale}): "
                     f"its best gain as a fraction of the way to perfect (it has learned at 20%); the control of "
                     f"{', '.join(r.case.id for r in rs)}", np.asarray(rs[0].values), worse="low")


def claims(book: ClaimBook, frame: pd.DataFrame, fidelity: str) -> list[CaseResult]:
    """Record one row per case (at its first scale), the control rows of the 256-token scales and
    the agreement rate; return every case's results."""
    results = results_by_case(frame, fidelity)
    smoke = CASE_FIDELITY[fidelity] == "quick"
    for r in results:
        if r.scale != "reference" or r.verdict == "not run":
            continue
        statement = f"{r.case.outcome} (reference scale; decided by {r.case.decision['statistic']})"
        passed = None if smoke or not r.conclusive else r.verdict == "agree"
        why = f"verdict {r.verdict} ({r.rule}); {r.measured or r.cause}"
        if r.cause and r.measured:
            why += f"; cause: {r.cause}"
        if smoke:
            why = f"quick fidelity is a smoke test ({r.n} seeds): reported, never counted; {why}"
        elif passed is None:
            why = f"inconclusive, not counted: {r.cause}"
        book.holds(r.case.id, statement, Interval(r.estimate, r.low, r.high, n=r.n), passed, why, "evidence", r.n,
                   r.diverged, r.side, r.against, f"case:{r.case.decision['statistic']}", r.values, label=r.label)
    _control_rows(book, results)
    k, n, rate, low, high = agreement(results)
    flags = [1.0 if r.verdict == "agree" else 0.0 for r in results if r.conclusive]
    label = " (quick smoke test: not the result)" if smoke else ""
    book.holds("agreement-rate", f"the share of conclusive cases whose sandbox verdict agrees with the published "
               f"outcome{label}", Interval(rate, low, high, n=0), None,
               f"{k} agree of {n} conclusive ({sum(r.verdict == 'inconclusive' for r in results)} inconclusive, "
               f"{sum(r.verdict == 'not run' for r in results)} not run, over cases × scales); exact Clopper–Pearson "
               "95% interval; no rate was declared to test, so reported", "evidence", 0, values=flags)
    return results


#: what this figure's data file keeps of each job, and early-warning's (they share 30 jobs: one spec): every
#: column but six logged signals neither figure, its cases nor their claims read (4.02 MB → 2.76 MB for
#: early-warning's file; every claim row the same)
CASE_DATA = {"drop": ("surprisal_mean", "reward", "update_norm", "ratio_min", "ratio_max", "cos_consecutive_update")}

register_figure(Figure(FIGURE, "sequences", "Published large-run outcomes against the sandbox's verdicts", None,
                       "notebooks/published_outcomes.py", plan=plan, data_spec=CASE_DATA))

__all__ = ["CASE_DATA", "FIGURE", "claims", "plan", "results_by_case"]
