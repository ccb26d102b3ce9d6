"""The case file's second amendment (issue 43): dated, validated, applied to the second round
without rewriting the first (simulations.cases.amendments)."""

import copy
import datetime

import pytest
import yaml

from simulations.cases import CASES_FILE, load_cases
from simulations.cases.amendments import round_config, second_round

CF = load_cases()
R2 = second_round(CF)
RAW = yaml.safe_load(CASES_FILE.read_text())
AMENDMENT = RAW["amendments"][0]


def test_the_amendment_is_dated_and_leaves_the_first_round_as_it_was_judged():
    assert AMENDMENT["date"] == datetime.date(2026, 11, 28) and R2.date == "2026-11-28"
    assert [c.id for c in CF.cases] == [c["id"] for c in RAW["cases"]]
    for case, raw in zip(CF.cases, RAW["cases"]):
        assert case.decision == raw["decision"] and case.outcome == raw["outcome"], case.id
    assert CF.case("vcpo_math_k10_tis_collapses_vcpo_stable").decision["statistic"] == "collapse_contrast"
    assert "event" not in CF.case("vcpo_math_k10_tis_collapses_vcpo_stable").decision


def test_round_two_reclassifies_moves_withdraws_and_adds_as_declared():
    ids = {c.id for c in R2.cases}
    for gone in ("praxis_seq_is_collapses_token_tis_stable", "speed_kills_grpo_gradnorm_explodes_at_collapse",
                 "vcpo_multiturn_gradnorm_spike_then_collapse"):
        assert gone not in ids
    moved = {e.get("case") for e in R2.out_of_scope}
    assert {"praxis_seq_is_collapses_token_tis_stable", "speed_kills_grpo_gradnorm_explodes_at_collapse"} <= moved
    assert [w["case"] for w in R2.withdrawn] == ["vcpo_multiturn_gradnorm_spike_then_collapse"]
    assert "precision_rl_bf16_kl_rises_before_collapse" in ids  # testable again under sampler_rounding
    for cid in ("precision_rl_token_tis_collapses_seq_mis_stable", "precision_rl_bf16_gspo_collapses_fp16_pg_stable"):
        assert R2.case(cid).decision["statistic"] == "final_contrast"
    assert R2.case("vcpo_math_k10_tis_collapses_vcpo_stable").decision["event"] == "dip"
    assert R2.case("gac_consecutive_gradients_align_when_stale").decision["min_live"] == 0.75
    new = [c for c in R2.cases if c.id not in {k.id for k in CF.cases}]
    assert len(new) >= 6
    for case in new:
        assert len(case.quote) >= 20 and ("repo" in case.source or "url" in case.source), case.id


def test_every_noninferior_case_has_a_plain_arm_that_must_fail_the_same_test():
    noninferior = [c for c in R2.cases if c.decision["statistic"] == "noninferior"]
    assert len(noninferior) >= 3
    for case in noninferior:
        assert case.decision["plain"] == "plain" and "plain" in case.arms, case.id
    assert R2.case("gac_matches_sync_at_high_staleness").arms["plain"] == {"loss": "GRPO", "lag": {"kind": "high"}}


def test_every_round_two_arm_builds_on_the_regime_with_the_calibrated_rounding():
    for case in R2.cases:
        for arm, spec in case.arms.items():
            cfg = round_config(R2, case, arm, population=2)
            assert cfg.task == "regime" and cfg.optimizer == "adamw"
            assert cfg.controllers[0] == ("clip_grad_norm", {"max_norm": 1.0})
            bits = {"bf16": 4.35, "fp16": 7.63}.get(spec.get("precision", "none"))
            assert cfg.frictions == ((("sampler_rounding", {"mantissa_bits": bits}),) if bits else ())
            assert cfg.steps >= 1000
            if arm == "control":
                assert cfg.staleness == {} and cfg.frictions == ()
    m2po = R2.case("m2po_prosperity_before_collapse_at_256")
    assert round_config(R2, m2po, "worse", population=2).steps == 1024  # 4 × D


def _load(tmp_path, data):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return load_cases(path)


@pytest.mark.parametrize("mutate, message", [
    (lambda a: a["reclassified"][0].update(case="nobody"), r"reclassified\[0\]\.case: 'nobody' is not a case"),
    (lambda a: a["withdrawn"][0].update(case=a["reclassified"][0]["case"]), "is already reclassified"),
    (lambda a: a["discrimination"].pop(), "needs a plain arm that must fail the same test"),
    (lambda a: a["mapping"]["precision"]["bf16"].update(mantissa_bits=60.0), r"mantissa_bits: must be a float in \[1, 52\]"),
    (lambda a: a["respecified"][0]["decision"].update(vibes=1), r"key\(s\) \['vibes'\] not defined for signal_level"),
    (lambda a: a["reclassified"][2]["decision"].update(event="soon"), "decision.event: must be one of"),
    (lambda a: a.update(date="28/11/2026"), "must be an ISO date"),
    (lambda a: a["statistics"].pop("plain"), r"statistics: no definition for \['plain'\]"),
    (lambda a: a["cases"][0]["decision"].update(against="nobody"), "is not an arm"),
    (lambda a: a["cases"][7]["decision"].update(lagging="vibes"), "decision.lagging: must be one of"),
    (lambda a: a["reclassified"][0].pop("read"), "missing key 'read'"),
])
def test_bad_amendments_fail_with_one_line_naming_the_entry(tmp_path, mutate, message):
    data = copy.deepcopy(RAW)
    mutate(data["amendments"][0])
    with pytest.raises(ValueError, match=message) as err:
        _load(tmp_path, data)
    assert "\n" not in str(err.value)


def test_first_round_decisions_may_not_use_the_amendments_keys(tmp_path):
    data = copy.deepcopy(RAW)
    data["cases"][5]["decision"]["event"] = "dip"
    with pytest.raises(ValueError, match=r"key\(s\) \['event'\] not defined for collapse_contrast"):
        _load(tmp_path, data)
