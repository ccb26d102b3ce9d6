"""The regime's probe, its controls' rules and its table (simulations/regime*.py)."""

import pandas as pd
import pytest

import sandbox.tasks.regime  # noqa: F401  (registers the tasks when the entry point is not installed)
from simulations.regime import (
    COLLAPSE_MARGIN,
    collapsed,
    negative_control_holds,
    probe,
    regime_config,
    warm_mismatch,
)
from simulations.regime_runs import ARMS, BITS, LONG_LR, arm_config
from simulations.regime_table import controls, plot, table

TINY = {"population": 2, "width": 16, "heads": 2, "layers": 1, "mlp": 16, "V": 64, "sft_steps": 20,
        "prompts_per_step": 4, "samples_per_prompt": 4, "eval_prompts": 8, "eval_samples": 2}


@pytest.fixture(autouse=True)
def _results(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDBOX_RESULTS", str(tmp_path))


def test_probe_records_every_quantity():
    config = regime_config(task_kwargs=TINY, estimator="reinforce", steps=12, seed=0)
    frame = probe(config, every=5, lag=3, progress=False)
    assert len(frame) == 13 * 2 and set(frame["step"]) == set(range(13))
    every_step = ["reward", "zero_adv_frac", "truncated", "length", "tail_mass", "kl_k1", "kl_k3", "grad_norm"]
    assert frame[frame.step < 12][every_step].notna().all().all()
    measured = frame[frame.step.isin([5, 10])]
    assert measured[["entropy", "seq_kl", "max_abs_dp", "update_k3", "lag_k3", "error"]].notna().all().all()
    assert frame[frame.step == 3]["entropy"].isna().all()
    # synchronous, no friction: the sampler is the learner (KV cache vs teacher forcing: float rounding)
    assert frame["kl_k3"].abs().max() < 1e-9 and frame["max_abs_dp"].max() < 1e-5
    # the policy moved: fresh-token KLs are positive, and three updates move it more than one
    assert (measured["update_k3"] > 0).all() and (measured["lag_k3"] > measured["update_k3"]).all()
    length = frame["length"].dropna()
    assert len(length) == 24 and ((length >= 1) & (length <= 21)).all()


def test_rounding_shows_a_mismatch_and_more_bits_show_less():
    config = regime_config(task_kwargs=TINY, estimator="reinforce", steps=1, seed=0)
    coarse, fine = warm_mismatch(config, 3.0)[1], warm_mismatch(config, 8.0)[1]
    assert coarse > fine > 0
    # KL ∝ 2^−2b for a small relative error: 5 bits apart is a factor of about 4^5 ≈ 1,000
    assert 100 < coarse / fine < 10_000


def _frame(errors_by_member, diverged=(False, False)):
    rows = []
    for member, errors in enumerate(errors_by_member):
        for step, err in enumerate(errors):
            rows.append({"step": step * 10, "member": member, "error": err, "diverged": diverged[member],
                         "entropy": 0.3, "zero_adv_frac": 0.4})
    return pd.DataFrame(rows)


def test_collapse_rule():
    frame = _frame([[0.7, 0.6, 0.75 + COLLAPSE_MARGIN], [0.7, 0.75, 0.79]])
    assert collapsed(frame).tolist() == [True, False]
    assert collapsed(_frame([[0.7, 0.2], [0.7, 0.2]], diverged=(False, True))).tolist() == [False, True]


def test_negative_control_rule():
    good = _frame([[0.7, 0.3, 0.1], [0.6, 0.3, 0.12], [0.65, 0.3, 0.1]], diverged=(False,) * 3)
    assert negative_control_holds(good) == {"learns": True, "entropy": True, "zero_adv": True}
    stuck = _frame([[0.7, 0.6, 0.5], [0.6, 0.5, 0.45], [0.65, 0.6, 0.5]], diverged=(False,) * 3)
    assert not negative_control_holds(stuck)["learns"]
    frozen = good.assign(entropy=0.01, zero_adv_frac=0.9)
    assert negative_control_holds(frozen) == {"learns": True, "entropy": False, "zero_adv": False}


def test_arms_are_declared_with_roles_and_the_calibrated_bits():
    assert {a.role for a in ARMS.values()} == {"negative", "positive", "table"}
    assert ARMS["bf16"].frictions == (("sampler_rounding", {"mantissa_bits": BITS["bf16"]}),)
    # the toy's logits are smaller than an LLM's: fewer bits than the real formats (7 and 10) for the
    # published KLs, ≈ ½·log₂(100) ≈ 3.3 bits apart (the published bf16/fp16 KL ratio ≈ 100)
    assert 1 < BITS["bf16"] < 7 and BITS["bf16"] < BITS["fp16"] < 10
    assert 2.5 < BITS["fp16"] - BITS["bf16"] < 4
    config = arm_config(ARMS["lag10-tis"], base_seed=1)
    assert config.staleness == {"kind": "fixed", "D": 10} and config.task_kwargs["population"] == 8
    assert config.optimizer == "adamw" and config.optimizer_kwargs["weight_decay"] == 0.1
    assert config.controllers == (("clip_grad_norm", {"max_norm": 1.0}),)
    # the long-answer lag arm and its partner control share the long lr; the others keep the regime's
    assert arm_config(ARMS["lag16-seq-is-long"], 0).lr == arm_config(ARMS["control-long"], 0).lr == LONG_LR
    assert arm_config(ARMS["control"], 0).lr == 1.5e-5 and ARMS["control-long"].role == "negative"


def test_controls_block_reads_the_rules_numbers():
    good = _frame([[0.7, 0.3, 0.1], [0.6, 0.3, 0.12], [0.65, 0.3, 0.1]], diverged=(False,) * 3)
    frame = pd.concat([good.assign(arm="control", base_seed=0),
                       _frame([[0.7, 0.9]] * 6 + [[0.7, 0.6]] * 2, diverged=(False,) * 8).assign(arm="lag16-seq-is", base_seed=0)])
    text = controls(frame, {"control": "negative", "lag16-seq-is": "positive"})
    neg = next(line for line in text.splitlines() if line.startswith("| control |"))
    assert "error 0.650 → 0.107" in neg and neg.endswith("| holds |")
    pos = next(line for line in text.splitlines() if line.startswith("| lag16-seq-is |"))
    assert "6 of 8 seeds collapsed (rate 95% CI [0.35, 0.97])" in pos and pos.endswith("| holds |")


def test_table_compares_with_published_values(tmp_path):
    config = regime_config(task_kwargs=TINY, estimator="reinforce", steps=10, seed=0)
    frame = probe(config, every=5, lag=3, progress=False).assign(arm="control", base_seed=0)
    text = table(frame)
    assert text.splitlines()[0].startswith("| quantity | control (1×2 seeds)")
    lag_row = next(line for line in text.splitlines() if line.startswith("| lag-10 KL"))
    assert "vcpo_results.png" in lag_row and ("in range" in lag_row or "×" in lag_row)
    assert table(pd.DataFrame()) == "(no committed regime runs yet)"
    plot(frame, tmp_path / "regime.png")
    assert (tmp_path / "regime.png").stat().st_size > 10_000


def test_a_pilot_is_written_apart_named_by_its_changes_and_never_read_by_the_table():
    from simulations.regime_runs import DATA, data_path

    path = data_path("control", 5, 4, None, {"sft_slip_spread": 0.35, "lr": 3e-5})
    assert path == DATA / "pilot" / "control-b5-s4-t1000-lr3e-05-sft_slip_spread0.35.parquet"
    assert data_path("control", 0) == DATA / "control-b0.parquet"
    assert data_path("lag16-seq-is", 1, 4, 20).name == "smoke-lag16-seq-is-b1-s4-t20.parquet"


def test_a_friction_pilot_sets_the_arms_one_friction_and_is_named_by_the_knob():
    import pytest

    from simulations.regime_runs import ARMS, BITS, DATA, data_path, with_friction_knobs

    path = data_path("bf16", 5, 4, None, {"friction.tail_rate": 0.01})
    assert path == DATA / "pilot" / "bf16-b5-s4-t1000-tail_rate0.01.parquet"
    frictions = with_friction_knobs(ARMS["bf16"], {"tail_rate": 0.01})
    assert frictions == (("sampler_rounding", {"mantissa_bits": BITS["bf16"], "tail_rate": 0.01}),)
    assert ARMS["bf16"].frictions[0][1] == {"mantissa_bits": BITS["bf16"]}  # the declared arm is untouched
    with pytest.raises(ValueError, match="exactly one friction; 'control' has 0"):
        with_friction_knobs(ARMS["control"], {"tail_rate": 0.01})
