"""The matched regime's parts: EOS decoding, the rounding friction, AdamW and its config, the warm start."""

import math

import pytest
import torch

import sandbox.tasks.regime  # noqa: F401  (registers the tasks when the entry point is not installed)
from sandbox.envs.base import Prompts
from sandbox.envs.sequences.arithmetic import EOS, PAD
from sandbox.envs.sequences.base import eos_mask
from sandbox.frictions import make_friction
from sandbox.frictions.rounding import round_mantissa
from sandbox.policies.warm_start import WarmStarted, cache_root
from sandbox.runtime.config import RunConfig
from sandbox.runtime.optim import PopulationOptimizer
from sandbox.tasks import make_task

SMALL = {"population": 2, "answer_len": 16, "width": 16, "heads": 2, "layers": 1, "mlp": 16, "V": 32}


def test_rounding_is_bf16_and_fp16_bit_for_bit():
    x = torch.randn(50_000, generator=torch.Generator().manual_seed(0)) * 30
    assert torch.equal(round_mantissa(x, 7), x.to(torch.bfloat16).float())
    assert torch.equal(round_mantissa(x, 10), x.to(torch.float16).float())
    # a real number of bits lies in between; the error is relative: it grows with |x|
    err = (round_mantissa(x, 8.5) - x).abs()
    assert err.max() <= 2.0 ** -8.5 * x.abs().max()
    big = x.abs() > 16
    assert err[big].mean() > err[~big & (x.abs() > 0.5)].mean()
    assert torch.equal(round_mantissa(torch.tensor([0.0, math.inf, -math.inf]), 3), torch.tensor([0.0, math.inf, -math.inf]))


def test_rounding_friction_is_deterministic_and_off_by_default():
    f = make_friction("sampler_rounding", mantissa_bits=7)
    z = torch.randn(4, 10)
    a = f.actor_logits(z, None, torch.Generator().manual_seed(1))
    b = f.actor_logits(z, None, torch.Generator().manual_seed(2))  # no random draw: the same error
    assert torch.equal(a, b) and not torch.equal(a, z)
    assert not make_friction("sampler_rounding").active and not make_friction("sampler_rounding", mantissa_bits=0).active
    with pytest.raises(ValueError, match="mantissa_bits"):
        make_friction("sampler_rounding", mantissa_bits=-1.0)


def test_adamw_matches_torch():
    p0 = torch.randn(1, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = p0[0].clone().requires_grad_(True)
    opt = torch.optim.AdamW([ref], lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    mine, p = PopulationOptimizer("adamw", lr=0.01, betas=(0.9, 0.95), weight_decay=0.1), [p0.clone()]
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        grad = torch.randn(5, 3, dtype=torch.float64, generator=g)
        ref.grad = grad.clone()
        opt.step()
        mine.step(p, [grad.unsqueeze(0)], (1,))
    assert torch.allclose(p[0][0], ref.detach(), rtol=0, atol=1e-15)
    assert PopulationOptimizer("adamw").weight_decay == 0.01 and PopulationOptimizer("adam").weight_decay == 0.0
    with pytest.raises(ValueError, match="weight_decay"):
        PopulationOptimizer("adam", weight_decay=0.1)


def test_optimizer_kwargs_keep_old_run_ids():
    plain = RunConfig(task="bandit", steps=3)
    assert "optimizer_kwargs" not in plain.to_dict()
    assert RunConfig(task="bandit", steps=3, optimizer_kwargs={}).run_id == plain.run_id
    decayed = RunConfig(task="bandit", steps=3, optimizer="adamw", optimizer_kwargs={"weight_decay": 0.1})
    assert decayed.run_id != plain.run_id and decayed.to_dict()["optimizer_kwargs"] == {"weight_decay": 0.1}
    with pytest.raises(ValueError, match="optimizer_kwargs: unknown field"):
        RunConfig(task="bandit", optimizer_kwargs={"momentum": 0.9})
    with pytest.raises(ValueError, match="optimizer_kwargs: .*betas"):
        RunConfig(task="bandit", optimizer="adamw", optimizer_kwargs={"betas": [0.9, 1.5]})


def test_eos_decoding_pads_after_eos_and_scores_agree():
    task = make_task("addition", **SMALL)
    params = task.init_params(torch.Generator().manual_seed(0))
    # make EOS likely so that rows stop at different positions
    with torch.no_grad():
        params[-1][..., EOS] += 2.5
    batch = task.draw_batch(torch.Generator().manual_seed(1))
    from sandbox.core.sampling import IDENTITY
    drawn = task.sample(params, batch, IDENTITY, torch.Generator().manual_seed(2))
    mask = eos_mask(drawn.actions, EOS)
    assert 0 < mask.sum() < mask.numel()  # some rows stopped early
    assert ((drawn.actions == PAD) | mask).all() and (drawn.logp.masked_select(~mask) == 0).all()
    obs = task.environment.observe(batch.obs, batch.extras)
    assert isinstance(obs, Prompts) and obs.eos == EOS
    forced = task.policy.score(params, obs, drawn.actions)
    assert torch.allclose(forced.masked_select(mask), drawn.logp.masked_select(mask), atol=1e-5)
    assert torch.equal(task.token_mask(batch, drawn.actions), mask)


def test_warm_start_learns_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDBOX_RESULTS", str(tmp_path))
    task = make_task("regime", **SMALL, sft_steps=40, sft_lr=3e-3, sft_prompts=16)
    cold = make_task("addition", **SMALL)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    warm, fresh = task.init_params(g1), cold.init_params(g2)
    assert not torch.equal(g1.get_state(), torch.Generator().manual_seed(0).get_state())  # the run generator advanced
    ev = lambda t, p: t.environment.evaluate(t.policy, p, torch.Generator().manual_seed(3))  # noqa: E731
    # SFT lowers the loss of the correct answers: their teacher-forced log-likelihood rises
    batch = task.draw_batch(torch.Generator().manual_seed(4))
    obs = task.environment.observe(batch.obs, batch.extras)
    right = task.environment.correct_answers(batch)
    m = eos_mask(right, EOS)
    ll = lambda p: (task.policy.score(p, obs, right) * m).sum() / m.sum()  # noqa: E731
    assert ll(warm) > ll(fresh) + 0.5
    assert ev(task, warm)["truncated"].mean() <= ev(cold, fresh)["truncated"].mean()
    files = list(cache_root().glob("*.pt"))
    assert len(files) == 1
    # a second build reads the cache: the same parameters, and the generator advanced alike
    g3 = torch.Generator().manual_seed(0)
    again = make_task("regime", **SMALL, sft_steps=40, sft_lr=3e-3, sft_prompts=16).init_params(g3)
    assert all(torch.equal(a, b) for a, b in zip(warm, again))
    assert torch.equal(g3.get_state(), g1.get_state())
    # another SFT knob is another checkpoint
    make_task("regime", **SMALL, sft_steps=41, sft_lr=3e-3, sft_prompts=16).init_params(torch.Generator().manual_seed(0))
    assert len(list(cache_root().glob("*.pt"))) == 2
    # another slip rate is another checkpoint too (the traces differ), and the rate is bounded
    make_task("regime", **SMALL, sft_steps=40, sft_lr=3e-3, sft_prompts=16, sft_slip=0.0).init_params(torch.Generator().manual_seed(0))
    assert len(list(cache_root().glob("*.pt"))) == 3
    with pytest.raises(ValueError, match="sft_steps"):
        make_task("regime", **SMALL, sft_steps=-1)
    with pytest.raises(ValueError, match=r"sft_slip.*\[0"):
        make_task("regime", **SMALL, sft_slip=1.0)
    assert isinstance(task.policy, WarmStarted) and task.policy.n_actions == 32


def test_heavy_tail_boosts_the_least_likely_token_at_a_deterministic_share_of_positions():
    from sandbox.frictions.rounding import heavy_tail, position_hash

    z = torch.randn(20_000, 50, generator=torch.Generator().manual_seed(0))
    h = position_hash(z)
    assert torch.equal(h, position_hash(z.clone())) and ((h >= 0) & (h < 1)).all()
    out = heavy_tail(z, 0.05, 8.0)
    hit = (out != z).any(-1)
    assert abs(hit.double().mean().item() - 0.05) < 0.01  # the share of positions hit
    pi, mu = torch.softmax(z, -1), torch.softmax(out, -1)
    rows = hit.nonzero().squeeze(-1)
    tail = z[rows].argmin(-1)
    assert (mu[rows, tail] > 0.99).all() and (pi[rows, tail] < 0.05).all()  # |π − μ| ≈ 1 on that token
    f = make_friction("sampler_rounding", tail_rate=0.05)
    assert f.active and torch.equal(f.actor_logits(z, None, None), out)
    with pytest.raises(ValueError, match="tail_rate"):
        make_friction("sampler_rounding", tail_rate=1.5)
