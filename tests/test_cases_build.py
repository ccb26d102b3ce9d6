"""Every case of the case file builds its runs by the mapping rule: the measured-mismatch friction
and the scale knobs exist and validate (simulations/cases)."""

from simulations.cases import batched_configs, case_configs, load_cases, scale_runs, staleness_of

CF = load_cases()


def test_every_case_builds_its_runs_with_the_mapped_frictions_and_an_on_policy_control():
    for case in CF.cases:
        for fidelity in ("quick", "paper"):
            runs = case_configs(case, CF.mapping, fidelity)
            plan = scale_runs(case, CF.mapping, fidelity)
            assert len(runs) == sum(len(r.arms) * len(r.seeds) for r in plan.values())
            for (arm, _scale, _seed), cfg in runs.items():
                spec = case.arms[arm]
                kl = CF.mapping["precision"][spec.get("precision", "none")]
                assert cfg.frictions == ((("measured_mismatch", {"token_kl": kl}),) if kl else ())
                assert cfg.staleness == staleness_of(spec.get("lag"), CF.mapping["d_probe"])
                assert cfg.task_kwargs["samples_per_prompt"] == (case.group_size or 8)
                if arm == "control":
                    assert cfg.staleness == {} and cfg.frictions == ()


def test_the_amended_fidelities_run_every_case_at_the_reference_scale_and_only_controls_at_256_tokens():
    for case in CF.cases:
        paper = scale_runs(case, CF.mapping, "paper")
        assert set(paper) == {"reference"}  # the third amendment: the 256-token controls are the full tier's
        plan = scale_runs(case, CF.mapping, "full")
        assert plan["reference"] == paper["reference"]
        assert plan["reference"].arms == tuple(case.arms) and plan["reference"].seeds == tuple(range(8))
        for scale in ("long", "long_vocab"):
            if case.id in ("m2po_prosperity_before_collapse_at_256", "vcpo_stable_at_lag_128"):
                assert plan[scale].arms == () and "exceeds the 300" in plan[scale].skipped
            else:
                assert plan[scale].arms == ("control",) and plan[scale].seeds == (0, 1)
                assert plan[scale].log_points == 20
    quick = {c.id: scale_runs(c, CF.mapping, "quick")["reference"] for c in CF.cases}
    assert sorted(k for k, r in quick.items() if r.skipped) == ["m2po_prosperity_before_collapse_at_256",
                                                                  "vcpo_stable_at_lag_128"]


def test_a_batched_run_holds_the_seeds_as_members_of_one_population():
    case = CF.case("vcpo_math_k10_tis_collapses_vcpo_stable")
    assert set(batched_configs(case, CF.mapping, "paper")) == {(a, "reference") for a in case.arms}
    batched = batched_configs(case, CF.mapping, "full")
    assert set(batched) == {(a, "reference") for a in case.arms} | {("control", "long"), ("control", "long_vocab")}
    ref = batched[("worse", "reference")]
    assert ref.task_kwargs["population"] == 8 and ref.seed == 0 and ref.log_points == 150
    one = case_configs(case, CF.mapping, "paper")[("worse", "reference", 3)]
    assert "population" not in one.task_kwargs and one.seed == 3
    assert ref.replace(task_kwargs=one.task_kwargs, seed=3, label=one.label) == one  # the same run, batched
    assert batched[("control", "long")].task_kwargs["population"] == 2
    assert ref.task_kwargs["eval_mode"] == "exact" and "eval_prompts" not in ref.task_kwargs  # enumerated
    assert batched[("control", "long")].task_kwargs["eval_prompts"] == 50  # 2^256 answers: sampled
