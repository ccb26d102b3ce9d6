"""The case file of published large-run outcomes (simulations/cases): validated, and its one
mapping rule applied to every case."""

import copy
import math

import pytest
import yaml

from simulations.cases import (
    CASES_FILE,
    SETTING_KEYS,
    load_cases,
    loss_fields,
    staleness_of,
    steps_of,
)

CF = load_cases()


def test_the_committed_file_holds_at_least_twelve_cases_each_with_its_control_and_quote():
    assert len(CF.cases) >= 12
    assert len({c.id for c in CF.cases}) == len(CF.cases)
    for case in CF.cases:
        assert "control" in case.arms and len(case.arms) >= 2, case.id
        assert case.quote.strip() and case.outcome.strip(), case.id
        assert set(SETTING_KEYS) <= set(case.published), case.id
    assert len(CF.out_of_scope) >= 3


def test_staleness_rule_by_hand():
    assert staleness_of(None, 16) == {}
    assert staleness_of({"kind": "fixed", "k": 256}, 16) == {"kind": "fixed", "D": 256}
    assert staleness_of({"kind": "max", "k": 10}, 16) == {"kind": "uniform", "D": 10}
    assert staleness_of({"kind": "minibatch", "n": 4}, 16) == {"kind": "uniform", "D": 3}
    assert staleness_of({"kind": "high"}, 16) == {"kind": "uniform", "D": 16}


def test_budget_rule_keeps_three_quarters_at_full_lag():
    m2po = CF.case("m2po_prosperity_before_collapse_at_256")
    assert steps_of(m2po, CF.mapping, "quick", "reference") == 1024  # 4 × 256 > 150
    vespo = CF.case("vespo_sapo_collapses_at_n4")
    assert steps_of(vespo, CF.mapping, "full", "long") == 300  # 4 × 3 < 300


def test_losses_expand_recipes_and_keep_their_own_fields():
    vcpo = loss_fields("VCPO", CF.mapping)
    assert vcpo["estimator"] == "tis" and vcpo["estimator_kwargs"] == {"C": 8.0, "level": "sequence"}
    assert vcpo["controllers"] == (("ess_lr", {}),) and vcpo["advantage"] == "min_variance"
    gac = loss_fields("GAC", CF.mapping)
    assert (gac["estimator"], gac["advantage"], gac["proximal"]) == ("ppo", "grpo", "behavior")


def _write(tmp_path, data):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["cases"][0].pop("quote"), "missing key 'quote'"),
    (lambda d: d["cases"][0]["experiment"]["arms"].pop("control"), "needs its on-policy control"),
    (lambda d: d["cases"][0]["experiment"]["arms"]["worse"].update(loss="LOSS?"), "is not in mapping.losses"),
    (lambda d: d["cases"][0]["experiment"]["arms"]["control"].update(precision="bf16"), "control is on-policy"),
    (lambda d: d["cases"][0]["decision"].update(statistic="vibes"), "decision.statistic: must be one of"),
    (lambda d: d["cases"][0]["decision"].update(worse="nobody"), "is not an arm"),
    (lambda d: d["cases"][0]["published"].pop("lr"), r"state \['lr'\]"),
    (lambda d: d["cases"][1].update(id=d["cases"][0]["id"]), "duplicate case id"),
    (lambda d: d["mapping"]["precision"].update(bf16=2.0), "must be a token KL in"),
    (lambda d: d["cases"][5]["experiment"]["arms"]["worse"].update(lag={"kind": "max"}), "needs k, an int ≥ 1"),
    (lambda d: d["mapping"]["fidelity"]["paper"].update(seeds=[0, 2]), "seeds are consecutive"),
    (lambda d: d["mapping"]["fidelity"]["quick"].update(max_steps=0), r"quick\.max_steps: must be an int ≥ 1"),
    (lambda d: d["mapping"]["fidelity"]["full"]["control_only"].update(scales=["huge"]), "not scales of this fidelity"),
    (lambda d: d["mapping"]["fidelity"]["full"]["control_only"].pop("seeds"), "missing key 'seeds'"),
    (lambda d: d["mapping"]["fidelity"]["quick"]["eval_by_scale"].update(long={}), r"eval_by_scale\.long: must be a scale"),
])
def test_bad_case_files_fail_with_one_line_naming_the_key(tmp_path, mutate, message):
    data = yaml.safe_load(CASES_FILE.read_text())
    mutate(data)
    with pytest.raises(ValueError, match=message) as err:
        load_cases(_write(tmp_path, data))
    assert "\n" not in str(err.value)


def test_the_file_round_trips(tmp_path):
    data = yaml.safe_load(CASES_FILE.read_text())
    again = load_cases(_write(tmp_path, copy.deepcopy(data)))
    assert [c.id for c in again.cases] == [c.id for c in CF.cases]
    assert not any(isinstance(v, float) and math.isnan(v) for v in CF.mapping["precision"].values())
