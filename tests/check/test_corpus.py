"""Every real public config of tests/check/corpus (README there: sources) through ``sandbox check
--dry-run``, as a user types it: each reads — with the rows its framework's code gives — or is
refused in one line for the right reason, by name; the refusals' ``--ignore`` suggestions, followed,
lead on; the warnings found before a refusal are printed with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.cli import main

CORPUS = Path(__file__).parent / "corpus"
A, G, C = "actor_rollout_ref.actor.", "algorithm.", "algorithm.rollout_correction."
KL = A + "use_kl_loss"
#: (file, extra arguments, exit code, what stdout (0) or stderr (2) must hold)
CASES = [
    ("areal_gsm8k_drgrpo.yaml", [], 2, ["config is an AReaL config", "max_head_offpolicyness"]),
    ("openrlhf_dapo_hybrid.yaml", [], 2, ["config is an OpenRLHF ≥ 0.9 config", "algo.advantage.estimator"]),
    ("openrlhf_v0811_reinforce_llama.yaml", [], 2, ["config is an OpenRLHF (< 0.9) config"]),
    ("skyrl_drgrpo_gsm8k.yaml", [], 2, ["config is a SkyRL config", "trainer.algorithm.policy_loss_type"]),
    ("primerl_reverse_text_rl.toml", [], 2, ["config is a prime-rl config", "orchestrator.group_size"]),
    ("trl_adaptive_entropy.yaml", [], 2, ["use_adaptive_entropy=True: an entropy bonus is not modelled"]),
    ("openr1_distill_qwen15b_demo.yaml", [], 2, ["use_liger_kernel=True: Liger's fused GRPO loss",
                                                 "pass --ignore use_liger_kernel"]),
    ("openr1_distill_qwen15b_demo.yaml", ["--ignore", "use_liger_kernel"], 0,
     ["trl config 'openr1_distill_qwen15b_demo' read as TRL 1.16.0 (GRPOConfig, GRPOTrainer)",
      "deployment.group      16", "reward_weights", "'sequence_mask'"]),
    ("trl_grpo_72b_multinode.yaml", [], 0, ["read as TRL 1.16.0", "'sequence_mask'"]),
    ("trl_async_grpo_example.yaml", ["--trainer", "async_grpo"], 0,
     ["read as TRL 1.16.0 (AsyncGRPOConfig", "deployment.proximal   'behavior'", "{'kind': 'uniform', 'D': 4}",
      "(AsyncGRPOTrainer.compute_loss) ppo.aggregation 'token-mean'"]),
    ("verl091_generated_ppo_trainer.yaml", [], 2,
     ["algorithm.adv_estimator='gae'", "would leave the verl 0.9.1 default 'gae', refused too"]),
    ("verl_gpg_qwen2_7b_math.yaml", [], 2, ["algorithm.adv_estimator='gpg'", "refused too"]),
    ("verl_otb_qwen25_7b.yaml", [], 2, ["'optimal_token_baseline'", "refused too"]),
    ("verl_rloo_qwen2_7b.yaml", [], 2, [G + "use_kl_in_reward=True: a KL penalty in the reward"]),
    ("verl_rfpp_baseline_qwen2_7b.yaml", [], 2, [G + "use_kl_in_reward=True"]),
    ("verl_grpo_qwen2_7b_math.yaml", [], 2, [KL + "=True", f"pass --ignore {KL} "]),
    ("verl_grpo_qwen2_7b_math.yaml", ["--ignore", KL], 0, ["read as verl 0.9.1:", "advantage", "'grpo'"]),
    # verl's own LoRA example repeats an override (Hydra: the last wins)
    ("verl_grpo_lora_qwen2_7b_1gpu.yaml", [], 2, [KL + "=True", A + "entropy_coeff=0.001"]),
    ("verl_grpo_lora_qwen2_7b_1gpu.yaml", ["--ignore", KL, A + "entropy_coeff"], 0, ["read as verl 0.9.1:"]),
    ("verl_gspo_3b_math_seqmean.yaml", [], 0, ["'gspo'", "gspo.aggregation", "'seq-mean-token-mean'"]),
    ("verl_gspo_qwen30b_a3b_ep_tokenmean.yaml", [], 0, ["'gspo'", "'token-mean'"]),
    ("verl_one_step_off_dapo_ris.yaml", [], 2, [C + "rollout_rs='seq_mean_k1': rejection sampling is modelled in "
                                                "bypass mode only"]),
    # the regression of issue 45: b178a3c's compute_prox_log_prob=True is decoupled, π_old = the window start
    ("verl_fully_async_grpo30b_mis.yaml", [], 2, ["async_training.compute_prox_log_prob, async_training."
                                                  "use_rollout_log_probs: not verl 0.9.1 key(s)",
                                                  "--framework verl@b178a3c"]),
    ("verl_fully_async_grpo30b_mis.yaml", ["--framework", "verl@b178a3c"], 2,
     [KL + "=True", C + "rollout_rs='seq_mean_k1': rejection sampling is modelled in bypass mode only",
      "sandbox: warning: the fully-async trainer recomputes π_old with the parameters of the sync window's start"]),
    ("verl_fully_async_grpo30b_mis.yaml", ["--framework", "verl@b178a3c", "--ignore", KL, C + "rollout_rs"], 0,
     ["read as verl b178a3c", "deployment.proximal  'recompute'", "warning: the fully-async trainer recomputes π_old",
      "ppo.eps_high        0.28", "{'kind': 'uniform', 'D': 5}"]),
    # three of issue 34's earlier configs, the ones its findings name (M3, M4, M8)
    ("verl_rollout_corr_rloo.yaml", [], 2, [C + "rollout_is_batch_normalize=True: batch-normalised IS weights",
                                            "sandbox: warning: rollout.n = 1: every group of one"]),
    ("verl_rollout_corr_rloo.yaml", ["--ignore", C + "rollout_is_batch_normalize"], 0,  # M3: A = R, as verl's rloo
     ["'tis'", "'constant'", "rollout.n = 1", "deployment.reuse", "('sequence', 2.0, None)"]),
    ("trl_lora_without_regret_grpo.yaml", [], 0,  # M4: steps_per_generation 8 ÷ gradient_accumulation_steps 4
     ["num_iterations × generation_batch_size ÷ per_device_train_batch_size ÷ gradient_accumulation_steps  "
      "deployment.reuse      2"]),
    ("trl_gspo_paper.yaml", [], 0, ["'gspo'", "gspo.eps_low          0.0003", "'seq-mean-token-mean'",  # M8: floats
                                    "deployment.reuse      4"]),
]


def test_the_corpus_is_every_file_with_its_source():
    files = {p.name for p in CORPUS.iterdir() if p.name != "README.md"}
    readme = (CORPUS / "README.md").read_text()
    assert files == {case[0] for case in CASES}
    for name in files:
        assert f"`{name}`" in readme, name
        assert (CORPUS / name).read_text().startswith("# Provenance: "), name


@pytest.mark.parametrize("name, args, code, shown", CASES, ids=[f"{c[0]}{' '.join([''] + c[1])}" for c in CASES])
def test_dry_run_reads_or_refuses_for_the_right_reason(tiny, tmp_path, capsys, name, args, code, shown):
    got = main(["check", str(CORPUS / name), "--dry-run", "--results", str(tmp_path / "r"), *args])
    out, err = capsys.readouterr()
    assert got == code, err
    text = out if code == 0 else err
    if code == 2:
        assert len([line for line in err.splitlines() if line.startswith("sandbox: error:")]) == 1, err
    else:
        assert "dry run: nothing was run or written" in out
    flat = " ".join(text.split())  # the table's columns are padded to the widest value
    for part in shown:
        assert " ".join(part.split()) in flat, f"{part!r} not in:\n{text}"


def test_warnings_are_printed_when_a_refusal_ends_the_run(tiny, tmp_path, capsys):
    """Issue 45: a file refused for one key hid the warnings computed for the others (a group of one)."""
    path = tmp_path / "one.yaml"
    path.write_text(f"- {G}adv_estimator=grpo\n- {KL}=True\n")  # rollout.n left at 1: a group of one
    assert main(["check", str(path), "--dry-run", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("sandbox: warning: rollout.n = 1: every group of one")
    assert err[-1].startswith(f"sandbox: error: {KL}=True: a KL loss")
