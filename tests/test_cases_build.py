"""Every case of the case file builds its runs by the mapping rule: the measured-mismatch friction
and the scale knobs exist and validate (simulations/cases)."""

from simulations.cases import case_configs, load_cases, staleness_of

CF = load_cases()


def test_every_case_builds_its_runs_with_the_mapped_frictions_and_an_on_policy_control():
    for case in CF.cases:
        for fidelity in ("quick", "paper"):
            runs = case_configs(case, CF.mapping, fidelity)
            fid = CF.mapping["fidelity"][fidelity]
            assert len(runs) == len(case.arms) * len(fid["scales"]) * len(fid["seeds"])
            for (arm, _scale, _seed), cfg in runs.items():
                spec = case.arms[arm]
                kl = CF.mapping["precision"][spec.get("precision", "none")]
                assert cfg.frictions == ((("measured_mismatch", {"token_kl": kl}),) if kl else ())
                assert cfg.staleness == staleness_of(spec.get("lag"), CF.mapping["d_probe"])
                assert cfg.task_kwargs["samples_per_prompt"] == (case.group_size or 8)
                if arm == "control":
                    assert cfg.staleness == {} and cfg.frictions == ()
