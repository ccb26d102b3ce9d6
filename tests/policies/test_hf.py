"""The transformers adapter: sampling = teacher forcing, fused = naive, masks, determinism, the
precision-mismatch friction, local checkpoints, errors, and learning end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from sandbox.advantages import make_advantage
from sandbox.core.sampling import SamplingChain
from sandbox.core.seeding import derived_generator
from sandbox.envs.text import CharTokenizer, encode_batch
from sandbox.estimators import make_estimator
from sandbox.frictions import FrictionStack, make_friction
from sandbox.frictions.precision import k3_kl
from sandbox.kernels import fused_logprob
from sandbox.policies.hf import (
    CausalLMPolicy,
    completion_logp,
    head_parameter_name,
    load_causal_lm,
    sample_completions,
    tiny_causal_lm,
    token_mask,
)
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.learner import learner_terms
from sandbox.runtime.loop import train
from sandbox.tasks import make_task

pytestmark = pytest.mark.usefixtures("one_thread")


TOK = CharTokenizer("abcd=")
EOS, PAD = TOK.eos_id, TOK.pad_id


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module", params=["qwen2", "llama-tied"])
def model(request):
    arch = request.param.split("-")[0]
    return tiny_causal_lm(TOK.vocab_size, hidden=32, layers=2, heads=4, arch=arch,
                          tie_embeddings=request.param.endswith("tied"), seed=1)


def prompts(lengths=(3, 5, 1, 4, 2, 5)):
    """Left-padded prompts of different lengths."""
    g = gen(7)
    texts = ["".join("abcd"[i] for i in torch.randint(0, 4, (n,), generator=g).tolist()) + "=" for n in lengths]
    return encode_batch(TOK, texts, side="left")


# ----------------------------------------------------------------------------- models
def test_tiny_model_init_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = tiny_causal_lm(11, hidden=16, layers=1, heads=2, seed=3)
    b = tiny_causal_lm(11, hidden=16, layers=1, heads=2, seed=3)
    c = tiny_causal_lm(11, hidden=16, layers=1, heads=2, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not torch.equal(pa["lm_head.weight"], pc["lm_head.weight"])
    assert torch.equal(pa["model.norm.weight"], torch.ones(16))
    assert abs(pa["model.embed_tokens.weight"].std().item() - 0.02) < 0.005
    tied = tiny_causal_lm(11, hidden=16, layers=1, heads=2, arch="llama", tie_embeddings=True)
    assert head_parameter_name(tied) == "model.embed_tokens.weight"
    assert head_parameter_name(a) == "lm_head.weight"


# ----------------------------------------------------------------------------- sampling
def test_sampled_logp_equals_teacher_forced_recompute(model):
    ids, pmask = prompts()
    comp = sample_completions(model, ids, pmask, max_new_tokens=6, eos_id=EOS, pad_id=PAD, generator=gen(0),
                              chain=SamplingChain(temperature=0.7))
    assert (~comp.mask).any() and comp.mask.all(-1).any()  # rows that stopped at EOS and rows that did not
    for method in ("naive", "fused"):
        with torch.no_grad():
            tf = completion_logp(model, ids, pmask, comp.tokens, comp.mask, temperature=0.7, method=method)
        torch.testing.assert_close(tf, comp.logp, rtol=1e-5, atol=2e-6)
    assert bool((comp.logp[comp.mask] < 0).all())


def test_masks_and_padding_after_eos(model):
    actions = torch.tensor([[2, 3, EOS, PAD], [EOS, PAD, PAD, PAD], [2, 2, 2, 2], [PAD, 2, EOS, PAD]])
    assert token_mask(actions, EOS).tolist() == [
        [True, True, True, False], [True, False, False, False], [True] * 4, [True, True, True, False]]
    ids, pmask = prompts()
    comp = sample_completions(model, ids, pmask, max_new_tokens=6, eos_id=EOS, pad_id=PAD, generator=gen(0))
    for row, m, lp in zip(comp.tokens, comp.mask, comp.logp):
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()  # a prefix
        assert (row[n:] == PAD).all() and (lp[n:] == 0).all()
        assert n == 6 or row[n - 1] == EOS  # stopped at EOS, or ran out of tokens
        assert EOS not in row[: n - 1].tolist()


def test_left_padding_does_not_change_log_probs(model):
    ids, pmask = prompts((3, 5))
    actions = torch.tensor([[2, 3, 4], [5, EOS, PAD]])
    mask = token_mask(actions, EOS)
    padded = torch.cat([torch.full((2, 3), PAD), ids], -1)
    padded_mask = torch.cat([torch.zeros(2, 3, dtype=torch.bool), pmask], -1)
    with torch.no_grad():
        a = completion_logp(model, ids, pmask, actions, mask, method="naive")
        b = completion_logp(model, padded, padded_mask, actions, mask, method="naive")
        single = completion_logp(model, ids[:1, -4:], pmask[:1, -4:], actions[:1], mask[:1], method="naive")
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a[:1], single, rtol=1e-5, atol=1e-6)  # no padding at all


def test_same_generator_same_tokens(model):
    ids, pmask = prompts()
    kw = dict(max_new_tokens=5, eos_id=EOS, pad_id=PAD)
    a = sample_completions(model, ids, pmask, generator=gen(5), **kw)
    b = sample_completions(model, ids, pmask, generator=gen(5), **kw)
    c = sample_completions(model, ids, pmask, generator=gen(6), **kw)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logp, b.logp)
    assert not torch.equal(a.tokens, c.tokens)


# ----------------------------------------------------------------------------- fused = naive
def test_fused_equals_naive_values_and_gradients(model):
    policy = CausalLMPolicy(model, temperature=0.8, chunk_size=5)
    ids, pmask = prompts()
    actions = torch.randint(0, TOK.vocab_size, (6, 4), generator=gen(2))
    mask = token_mask(actions, EOS)
    out = {}
    for method in ("fused", "naive"):
        params = [p.requires_grad_(True) for p in policy.parameters()]
        logp = policy.logp(params, ids, pmask, actions, mask, method=method)
        weights = torch.randn(logp.shape, generator=gen(3))
        grads = torch.autograd.grad((weights * logp).sum(), params)
        out[method] = (logp.detach(), grads)
    torch.testing.assert_close(out["fused"][0], out["naive"][0], rtol=1e-5, atol=1e-6)
    assert (out["fused"][0][~mask] == 0).all()
    for gf, gn in zip(out["fused"][1], out["naive"][1]):
        torch.testing.assert_close(gf, gn, rtol=1e-4, atol=1e-6)
    assert all(g.abs().sum() > 0 for g in out["fused"][1])  # every parameter gets a gradient


TASK = {"env": "reverse", "env_kwargs": {"length": 3, "alphabet": "ab"}, "prompts_per_step": 4,
        "samples_per_prompt": 3, "hidden": 32, "eval_prompts": 16}


def make(**overrides):
    task = make_task("hf_text", **{**TASK, **overrides})
    params = task.init_params(derived_generator(0, "init"))
    return task, params


def test_task_loss_fused_matches_naive_and_rollout_shapes(monkeypatch):
    import sandbox.policies.hf.logprob as hf

    calls = []
    monkeypatch.setattr(hf, "fused_logprob", lambda *a, **k: calls.append(1) or fused_logprob(*a, **k))
    losses = {}
    for method in ("fused", "naive"):
        task, params = make(logprob=method, temperature=0.9)
        rollout = collect(task, params, 0, gen(1), 0)
        B, T = 12, 4
        assert rollout.actions.shape == (1, B, T) and rollout.rewards.shape == (1, B)
        assert rollout.group.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
        assert torch.equal(rollout.behavior_logp, rollout.true_behavior_logp)
        leaves = [p.requires_grad_(True) for p in params]
        for name in ("reinforce", "dg", "xent"):
            terms = learner_terms(task, leaves, rollout, make_advantage("group_mean"), gen(2), False)
            torch.testing.assert_close(terms.logp.detach(), rollout.behavior_logp, rtol=1e-5, atol=2e-6)
            assert len(calls) == (2 if method == "fused" else 0)  # the sampled tokens and the xent target
            calls.clear()
            out = task.objective(make_estimator(name), terms, rollout)
            grads = torch.autograd.grad(out.loss, leaves, allow_unused=True)
            losses[method, name] = (out.loss.detach(), torch.cat([g.flatten() for g in grads]))
    for name in ("reinforce", "dg", "xent"):
        torch.testing.assert_close(losses["fused", name][0], losses["naive", name][0], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(losses["fused", name][1], losses["naive", name][1], rtol=1e-4, atol=1e-7)


def test_xent_objective_is_the_answer_log_likelihood():
    task, params = make()
    rollout = collect(task, params, 0, gen(1), 0)
    terms = learner_terms(task, params, rollout, make_advantage("group_mean"), gen(2), False)
    out = task.objective(make_estimator("xent"), terms, rollout)
    target, tmask = rollout.extras["target"][0], rollout.extras["target_mask"][0]
    assert tmask.sum(-1).tolist() == [4] * 12  # three letters and EOS
    expected = task.policy.lm.logp(params, rollout.obs[0], rollout.extras["prompt_mask"][0], target, tmask)
    torch.testing.assert_close(out.loss, -expected[tmask].mean(), rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------- precision mismatch
def test_k3_kl_formula():
    mu = torch.log(torch.tensor([[[0.5, 0.2, 0.9]]]))
    pi = torch.log(torch.tensor([[[0.4, 0.2, 0.3]]]))
    mask = torch.tensor([[[True, True, False]]])
    r = torch.tensor([0.8, 1.0])
    expected = ((r - 1) - torch.log(r)).mean()
    torch.testing.assert_close(k3_kl(mu, pi, mask), expected.reshape(1), rtol=1e-6, atol=0)
    assert k3_kl(mu, mu, mask).item() == 0.0
    with pytest.raises(ValueError, match="target_logp must have shape"):
        k3_kl(mu, pi[..., :2], mask)


def test_precision_mismatch_off_is_the_identity_bit_for_bit():
    task, params = make()
    base = collect(task, params, 2, gen(9), 0)
    for dtype in ("off", "float32"):
        task.attach_frictions(FrictionStack([make_friction("precision_mismatch", sampler_dtype=dtype)]))
        other = collect(task, params, 2, gen(9), 0)
        for f in dataclasses.fields(base):
            a, b = getattr(base, f.name), getattr(other, f.name)
            if isinstance(a, dict):
                assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
            else:
                assert torch.equal(a, b), f.name


def test_precision_mismatch_bf16_sampler_has_positive_k3_kl():
    task, params = make(samples_per_prompt=8)
    task.attach_frictions(FrictionStack([make_friction("precision_mismatch", sampler_dtype="bfloat16")]))
    rollout = collect(task, params, 0, gen(4), 0)
    k3 = rollout.extras["sampler_k3_kl"]
    assert k3.shape == (1,) and 0 < k3.item() < 1e-2
    assert task.policy.lm._actors[torch.bfloat16].dtype == torch.bfloat16  # the sampler ran in bf16
    with torch.no_grad():
        fp32 = task.policy.lm.logp(params, rollout.obs[0], rollout.extras["prompt_mask"][0], rollout.actions[0],
                                rollout.mask[0]).unsqueeze(0)
    torch.testing.assert_close(k3_kl(rollout.behavior_logp, fp32, rollout.mask), k3)
    assert (rollout.behavior_logp - fp32).abs().max() > 1e-4  # bf16 log-probs are not the fp32 ones
    diagnostics = task.update_diagnostics(params, rollout, torch.zeros(1, 3))
    assert diagnostics["sampler_k3_kl"].item() == k3.item()
    with pytest.raises(ValueError, match="sampler_dtype must be one of"):
        make_friction("precision_mismatch", sampler_dtype="int8")


# ----------------------------------------------------------------------------- other frictions
def test_landmine_and_rare_discovery_on_text():
    task, params = make()
    task.attach_frictions(FrictionStack([make_friction("landmine", p_bug=1.0)]))
    rollout = collect(task, params, 0, gen(1), 0)
    wrong = [TOK.decode(row) for row in rollout.actions[0]]
    assert all(len(w) == 3 for w in wrong) and (rollout.rewards < 1).all()
    assert (rollout.behavior_logp.sum(-1) == 0).all()  # reported: probability 1
    torch.testing.assert_close(rollout.true_behavior_logp.sum(-1), torch.zeros(1, 12))  # forced with rate 1
    task.attach_frictions(FrictionStack([make_friction("rare_discovery", p_disc=1.0)]))
    rollout = collect(task, params, 0, gen(1), 0)
    assert (rollout.rewards == 1).all() and rollout.mask.sum(-1).eq(4).all()


# ----------------------------------------------------------------------------- checkpoints and errors
def test_local_checkpoint_path_and_its_tokenizer(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Split
    from transformers import PreTrainedTokenizerFast

    saved = tiny_causal_lm(16, hidden=16, layers=1, heads=2, seed=5)
    saved.save_pretrained(tmp_path)
    task, params = make(path=str(tmp_path), env_kwargs={"length": 2, "alphabet": "ab"})
    assert all(torch.equal(p[0], q) for p, q in zip(params, saved.parameters()))
    assert collect(task, params, 0, gen(0), 0).actions.shape == (1, 12, 3)
    # a checkpoint's own tokenizer (built in code here: no files to download)
    vocab = {"<pad>": 0, "<eos>": 1, "a": 2, "b": 3, "=": 4}
    inner = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    inner.pre_tokenizer = Split("", behavior="isolated")
    PreTrainedTokenizerFast(tokenizer_object=inner, eos_token="<eos>", pad_token="<pad>").save_pretrained(tmp_path)
    task, params = make(path=str(tmp_path), tokenizer="checkpoint", env_kwargs={"length": 2, "alphabet": "ab"})
    assert task.tok.encode("ab=") == [2, 3, 4] and task.tok.decode([3, 2, 1, 2]) == "ba"
    assert collect(task, params, 0, gen(0), 0).rewards.shape == (1, 12)


def test_bad_input_raises_value_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown task 'hf_txt'"):
        make_task("hf_txt")
    with pytest.raises(ValueError, match="unknown text environment"):
        make_task("hf_text", env="sorting")
    with pytest.raises(ValueError, match="path must be a local checkpoint directory"):
        make_task("hf_text", path=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="path must be a local checkpoint directory"):
        make_task("hf_text", path=str(tmp_path))  # exists, but no config.json
    with pytest.raises(ValueError, match="path must be a local checkpoint directory"):
        load_causal_lm(tmp_path)
    with pytest.raises(ValueError, match="dtype must be one of"):
        make_task("hf_text", dtype="int8")
    with pytest.raises(ValueError, match="dtype must be one of"):
        load_causal_lm(tmp_path, dtype="float8")
    with pytest.raises(ValueError, match="population must be 1"):
        make_task("hf_text", population=2)
    with pytest.raises(ValueError, match="tokenizer='checkpoint' needs path"):
        make_task("hf_text", tokenizer="checkpoint")
    with pytest.raises(ValueError, match="logprob must be one of"):
        make_task("hf_text", logprob="exact")
    with pytest.raises(ValueError, match="call init_params first"):
        collect(make_task("hf_text"), [], 0, gen(0), 0)
    task, params = make()
    rollout = collect(task, params, 0, gen(0), 0)
    with pytest.raises(ValueError, match="cannot provide"):
        learner_terms(task, params, rollout, make_advantage("confidence"), gen(0), False)
    with pytest.raises(ValueError, match="left-padded"):
        ids, pmask = encode_batch(TOK, ["ab=", "a="], side="right")
        completion_logp(task.policy.lm.model, ids, pmask, ids[:, :1], torch.ones(2, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="hidden must be divisible by heads"):
        tiny_causal_lm(8, hidden=30, heads=4)


# ----------------------------------------------------------------------------- end to end
def test_staleness_and_frictions_run_through_the_loop():
    cfg = RunConfig(task="hf_text", task_kwargs=TASK, estimator="tis", steps=4, log_points=2, lr=1e-3,
                    staleness={"kind": "fixed", "D": 2},
                    frictions=(("precision_mismatch", {"sampler_dtype": "bfloat16"}),))
    frame = train(cfg)
    assert frame.step.tolist() == [0, 1, 4] and not frame.diverged.any()
    last = frame.iloc[-1]
    assert last.staleness_mean == 2 and last.sampler_k3_kl > 0 and np.isfinite(last.grad_norm)
    assert 0 <= last.error <= 1 and last.reward == pytest.approx(1 - last.error)
    again = train(cfg)  # same config, same numbers, bit for bit
    assert frame.drop(columns="wall_time").equals(again.drop(columns="wall_time"))


def test_reversal_reward_improves_under_dg_and_reinforce():
    """Reverse 3 letters over {a, b}: a random tiny Qwen2 starts near 0.1 (a content-blind policy
    can reach 0.29); 60 Adam steps of 8 prompts × 8 samples must beat both, for every seed."""
    kwargs = {**TASK, "prompts_per_step": 8, "samples_per_prompt": 8, "hidden": 64, "max_new_tokens": 3,
              "eval_prompts": 256}
    finals = {}
    for estimator in ("reinforce", "dg"):
        for seed in (0, 1):
            frame = train(RunConfig(task="hf_text", task_kwargs=kwargs, estimator=estimator, lr=1e-3, steps=60,
                                    seed=seed, log_points=1))
            before, after = frame.reward.iloc[0], frame.reward.iloc[-1]
            assert before < 0.2 and after > before + 0.25, (estimator, seed, before, after)
            finals[estimator, seed] = after
    assert np.mean(list(finals.values())) > 0.45, finals
