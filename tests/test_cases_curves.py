"""The third amendment's curves (simulations.cases.curves, curves.yaml): the declaration, the arms it
builds, the reading rules on hand-made curves, and the provenance of its committed runs."""

from __future__ import annotations

import copy
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sandbox.analysis.provenance import is_dirty
from simulations.cases import curves
from simulations.cases.curves import (
    Point,
    arm_key,
    check,
    collapsed_seeds,
    config_of,
    critical_lr,
    declaration,
    median_interval,
    points,
    sign_test,
)
from simulations.cases.curves_report import PENDING, UNCONFIRMED, cases, confirm, controls, markdown, rate


def frame(errors: dict[int, list[float]], every: int = 10, lag_k3: float = 1e-3) -> pd.DataFrame:
    """A probe-like frame: one error curve per member, logged every ``every`` steps."""
    rows = []
    for member, curve in errors.items():
        for i, e in enumerate(curve):
            rows.append({"step": i * every, "member": member, "error": e, "lag_k3": lag_k3,
                         "diverged": bool(np.isnan(curve[-1]))})
    return pd.DataFrame(rows)


LEARNS = [0.8, 0.5, 0.3, 0.25, 0.2]
COLLAPSES = [0.8, 0.4, 0.3, 0.9, 1.0]
FLAT = [0.8, 0.8, 0.79, 0.81, 0.8]
DIVERGES = [0.8, 0.4, 0.3, math.nan, math.nan]


def test_collapsed_seeds_reads_the_case_files_rule():
    got = collapsed_seeds(frame({0: LEARNS, 1: COLLAPSES, 2: FLAT, 3: DIVERGES}))
    assert got.tolist() == [False, True, False, True]
    # a dip that recovers is no collapse
    assert not collapsed_seeds(frame({0: [0.8, 0.3, 0.9, 0.3, 0.3]})).iloc[0]


def test_critical_lr_is_the_smallest_lr_that_collapses():
    by_lr = {1e-3: pd.Series({0: True, 1: True, 2: False}), 5e-4: pd.Series({0: False, 1: True, 2: False})}
    assert critical_lr(by_lr).tolist() == [1e-3, 5e-4, math.inf]


def test_median_interval_is_the_order_statistics_at_8_seeds():
    m, lo, hi = median_interval([8, 1, 7, 2, 6, 3, 5, 4])
    assert (m, lo, hi) == (4.5, 2.0, 7.0)
    assert all(math.isnan(x) for x in median_interval([1, 2, 3])[1:])


def test_sign_test_by_hand():
    inf = math.inf
    worse = pd.Series([1e-3] * 7 + [inf])
    better = pd.Series([inf] * 8)
    got = sign_test(worse, better, 0.05)
    assert (got["n_plus"], got["n_minus"], got["ties"]) == (7, 0, 1)
    assert got["p_forward"] == pytest.approx(0.5 ** 7) and got["verdict"] == "agree"
    assert sign_test(better, worse, 0.05)["verdict"] == "opposite"
    assert sign_test(better, better, 0.05)["verdict"] == "not reproduced: no collapse on the grid"
    # 5 of 8 one way is not enough: P(Bin(8, ½) ≥ 5) = 93/256
    mixed = sign_test(pd.Series([1.0] * 5 + [3.0] * 3), pd.Series([2.0] * 8), 0.05)
    assert mixed["p_forward"] == pytest.approx(93 / 256) and mixed["verdict"] == "not reproduced"


def test_the_declaration_partitions_the_round_two_cases_and_checks_its_keys():
    d = declaration()
    assert len(d["cases"]) + len(d["not_curves"]) == 21
    bad = copy.deepcopy(d)
    bad["knob"]["grid"] = [1e-3, -1.0]
    with pytest.raises(ValueError, match="knob.grid"):
        check(bad)
    bad = copy.deepcopy(d)
    bad["rules"]["alpha"] = 5
    with pytest.raises(ValueError, match="rules.alpha"):
        check(bad)
    bad = copy.deepcopy(d)
    bad["not_curves"] = bad["not_curves"][1:]
    with pytest.raises(ValueError, match="m2po_prosperity_before_collapse_at_256"):
        check(bad)
    bad = copy.deepcopy(d)
    bad["cases"][0] = {**bad["cases"][0], "better": "nope"}
    with pytest.raises(ValueError, match="better: 'nope' is not an arm"):
        check(bad)


def test_arms_that_run_the_same_thing_share_their_runs():
    from simulations.cases.amendments import second_round

    r2 = second_round()
    oat = r2.case("oat_token_tis_more_stable_than_none")
    prl = r2.case("precision_rl_bf16_grpo_collapses_fp16_pg_stable")
    assert arm_key(oat, "worse") == arm_key(prl, "worse") == "DrGRPO_recompute-bf16"
    keys = [p.key for p in points() if p.base_seed == 0]
    per_lr = len(keys) // len(declaration()["knob"]["grid"])
    assert len(set(keys)) == per_lr and keys[:2] == ["control", "lag16-seq-is"]


def test_each_point_runs_its_arm_at_the_declared_lr_and_scale():
    d = declaration()
    by_key = {p.key: p for p in points() if p.lr == 1e-3}
    tis = config_of(by_key["TIS_seq8-D10u-g16"])
    assert (tis.lr, tis.steps, tis.estimator, tis.staleness) == (1e-3, 300, "tis", {"kind": "uniform", "D": 10})
    assert tis.task_kwargs["answer_len"] == 21 and tis.task_kwargs["population"] == 8
    assert tis.task_kwargs["samples_per_prompt"] == 16
    bf16 = config_of(by_key["DrGRPO_recompute-bf16"])
    assert bf16.frictions == (("sampler_rounding", {"mantissa_bits": d["mapping"]["precision"]["bf16"]["mantissa_bits"]}),)
    ctrl = config_of(by_key["lag16-seq-is"])
    assert (ctrl.lr, ctrl.steps, ctrl.estimator, ctrl.staleness["D"]) == (1e-3, 300, "is_pg", 16)


def _data(worse: dict, better: dict, neg: dict, pos: dict, case: str = "vcpo_math_k10_tis_collapses_vcpo_stable"):
    """{(key, lr): frame} for the controls and one case; each dict: lr → list of 8 curves."""
    from simulations.cases.amendments import second_round

    c = second_round().case(case)
    out = {}
    for key, spec in (("control", neg), ("lag16-seq-is", pos), (arm_key(c, "worse"), worse), (arm_key(c, "better"), better)):
        for lr, curves_ in spec.items():
            out[key, lr] = frame(dict(enumerate(curves_)))
    return out


def test_a_case_agrees_when_its_worse_arm_collapses_at_lower_lrs():
    calm, bad = [LEARNS] * 8, [COLLAPSES] * 8
    data = _data(worse={5e-4: [COLLAPSES] * 7 + [LEARNS], 1e-3: bad}, better={5e-4: calm, 1e-3: calm},
                 neg={5e-4: calm, 1e-3: calm}, pos={5e-4: calm, 1e-3: bad})
    ctrl = controls(data)
    assert ctrl["counts"].all() and ctrl["positive_collapsed"].tolist() == [0, 8]
    rows = cases(data, ctrl)
    row = rows.iloc[0]
    assert row["verdict"] == "agree" and (row["n_plus"], row["n_minus"], row["ties"]) == (8, 0, 0)
    assert row["worse_counts"] == "7, 8" and row["worse_critical"][0] == 5e-4
    assert (rows.iloc[1:]["verdict"] == "not run").all()
    r = rate(rows)
    assert (r["agree"], r["decided"], r["counts"]["not run"]) == (1, 1, len(rows) - 1)
    assert "| `vcpo_math_k10_tis_collapses_vcpo_stable` |" in markdown(ctrl, rows)


def test_an_lr_that_collapses_the_negative_control_is_dropped_and_no_positive_means_inconclusive():
    calm, bad = [LEARNS] * 8, [COLLAPSES] * 8
    data = _data(worse={1e-3: bad, 2e-3: bad}, better={1e-3: calm, 2e-3: bad},
                 neg={1e-3: calm, 2e-3: [COLLAPSES] * 2 + [LEARNS] * 6}, pos={1e-3: calm, 2e-3: bad})
    ctrl = controls(data)
    assert ctrl.set_index("lr")["counts"].to_dict() == {1e-3: True, 2e-3: False}
    row = cases(data, ctrl).iloc[0]
    assert row["lrs"] == [1e-3]
    assert row["verdict"] == "inconclusive: the positive control does not collapse on the grid"


def test_committed_curve_runs_were_made_by_code_holding_the_declaration(monkeypatch):
    """Every committed run is stamped clean and descends from the first commit whose curves.yaml
    declares it (the curves, a later base seed's confirmation of a case, a case's own control)."""
    import yaml

    root = curves.DATA.parents[3]

    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)

    yaml_path = "simulations/cases/curves.yaml"
    history = git("log", "--reverse", "--format=%H", "--", yaml_path).stdout.split()
    files = sorted(curves.DATA.glob("*.parquet"))
    if not history or not files:
        pytest.skip("no committed curve runs (or no git history) to check")
    declared_at: dict[str, str] = {}  # file name -> the first commit declaring it
    for commit in history:
        then = yaml.safe_load(git("show", f"{commit}:{yaml_path}").stdout)
        then["knob"].setdefault("run_order", then["knob"]["grid"])
        monkeypatch.setattr(curves, "declaration", lambda then=then: then)
        for p in points():
            declared_at.setdefault(p.path.name, commit)
    monkeypatch.undo()
    for path in files:
        stamp = pd.read_parquet(path, columns=["commit"])["commit"].iloc[0]
        assert not is_dirty(stamp), f"{path.name}: made from a dirty tree ({stamp})"
        assert path.name in declared_at, f"{path.name}: no committed curves.yaml declares this run"
        declared = declared_at[path.name]
        assert git("merge-base", "--is-ancestor", declared, stamp).returncode == 0, \
            f"{path.name}: made at {stamp}, before its declaration {declared[:7]} was committed"


def test_points_name_their_files_by_key_lr_and_base_seed():
    assert Point("control", 1e-3, None, "control").path.name == "control-lr0.001-b0.parquet"


def test_two_runs_side_by_side_skip_each_others_points(tmp_path, monkeypatch):
    import os

    from simulations.cases import curves_report

    monkeypatch.setattr(curves, "DATA", tmp_path)
    p = Point("control", 1e-3, None, "control")
    assert curves_report._claim(p)  # this process holds it now
    marker = curves_report._marker(p)
    assert marker.read_text() == str(os.getpid())
    assert not curves_report._claim(p)  # a live holder: skipped
    marker.write_text("999999999")  # a holder that is gone: taken over
    assert curves_report._claim(p) and marker.read_text() == str(os.getpid())


def test_the_docs_block_is_generated_from_the_committed_runs():
    from simulations.cases.curves_report import MARKER, PAGE, doc_block_text
    from simulations.regime_table import doc_block

    block = doc_block(PAGE.read_text(), MARKER)
    assert block is not None, "docs/predictions.md lost its generated curves markers"
    assert block.strip() == doc_block_text().strip(), \
        "docs/predictions.md's curves block is stale: run `python -m simulations.cases.curves_report docs`"


def test_the_readme_states_the_curves_rate_and_the_runs_left_as_the_committed_runs_give_them():
    from simulations.cases.curves_report import front_page, progress, readings

    clause = front_page(readings(), progress())
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert clause in readme, f"README.md's curves sentence is stale: it must say {clause!r}"


def test_progress_counts_the_runs_on_disk_by_block(monkeypatch):
    from simulations.cases import curves_report

    pl = curves_report.plan().assign(done=False)
    pl.loc[:2, "done"] = True
    monkeypatch.setattr(curves_report, "plan", lambda: pl)
    prog = curves_report.progress()
    assert prog["made"] == 3 and prog["declared"] == len(pl) == 108
    assert sum(n for *_, n in prog["missing"]) == 105
    first = pl.iloc[3]
    assert prog["missing"][0][:2] == (first["base_seed"], first["lr"])  # blocks keep the run order
    rows = pd.DataFrame({"verdict": ["agree", "not reproduced"]})
    assert curves_report.front_page({"final": rows}, prog).endswith("105 of the 108 declared runs still to make")
    assert curves_report.front_page({"final": rows}, {**prog, "made": 108}).startswith("1 of 2 agree, 0.50 [")


def test_the_confirming_base_seed_runs_the_controls_and_the_confirmed_cases_only():
    d = declaration()
    base1 = d["confirmation"]["base_seed"]
    at1 = [p for p in points() if p.base_seed == base1]
    assert base1 != d["mapping"]["base_seed"] and at1
    from simulations.cases.amendments import second_round

    r2 = second_round()
    keys = set(d["controls"].values()) | {arm_key(r2.case(e["case"]), e[s]) for e in d["cases"]
                                          if e["case"] in d["confirmation"]["cases"] for s in ("worse", "better")}
    keys |= {arm_key(r2.case(c), "control") for c in d["confirmation"]["cases"]}  # the diagnostic
    assert {p.key for p in at1} == keys and len(at1) == len(keys) * len(d["knob"]["grid"])
    assert all(p.path.name.endswith(f"-b{base1}.parquet") for p in at1)
    assert config_of(at1[0]).seed == base1
    bad = copy.deepcopy(d)
    bad["confirmation"]["blocks"] = bad["confirmation"]["blocks"][:-1]
    with pytest.raises(ValueError, match="confirmation.blocks"):
        check(bad)
    bad = copy.deepcopy(d)
    bad["confirmation"]["cases"] = ["m2po_prosperity_before_collapse_at_256"]
    with pytest.raises(ValueError, match="confirmation.cases"):
        check(bad)


def test_an_agreement_counts_only_when_the_second_base_seed_confirms_it():
    names = ["a", "b", "c", "d"]
    rows = pd.DataFrame({"case": names, "verdict": ["agree", "agree", "agree", "not reproduced"]})
    rows1 = pd.DataFrame({"case": ["a", "b"], "verdict": ["agree", "not reproduced"]})
    got = confirm(rows, rows1)["verdict"].tolist()
    assert got == ["agree", UNCONFIRMED, PENDING, "not reproduced"]
    inconclusive = pd.DataFrame({"case": ["a"], "verdict": ["inconclusive: the positive control does not collapse on the grid"]})
    assert confirm(rows.iloc[:1], inconclusive)["verdict"].tolist() == [PENDING]
    r = rate(confirm(rows, rows1))
    assert (r["agree"], r["decided"]) == (1, 3)  # the pending case is left out, the unconfirmed one counts against


def test_the_confirmed_cases_own_controls_run_as_a_diagnostic_beside_their_arms():
    from simulations.cases.curves import diagnosed
    from simulations.cases.curves_report import diagnostics

    d = declaration()
    cases_ = diagnosed()
    assert [c.id for c in cases_] == d["confirmation"]["cases"]
    keys = {p.key for p in points()}
    assert all(arm_key(c, "control") in keys for c in cases_)
    gspo = next(c for c in cases_ if c.id == "precision_rl_bf16_gspo_collapses_fp16_pg_stable")
    assert config_of(Point(arm_key(gspo, "control"), 2e-3, gspo.id, "control")).frictions == ()  # no mismatch
    calm, bad = [LEARNS] * 8, [COLLAPSES] * 8
    data = {(arm_key(gspo, "worse"), 2e-3): frame(dict(enumerate(bad))),
            (arm_key(gspo, "better"), 2e-3): frame(dict(enumerate(calm))),
            (arm_key(gspo, "control"), 2e-3): frame(dict(enumerate([COLLAPSES] * 7 + [LEARNS])))}
    text = diagnostics({0: data})
    assert "| 0 | 0.002 | `GSPO-bf16`: 8 of 8 | `PG_seq_IS-fp16`: 0 of 8 | `GSPO`: 7 of 8 |" in text
    assert diagnostics({0: {}}) == ""
