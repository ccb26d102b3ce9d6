"""The tiny transformer: size and architecture against an independent nn.Module reference, the
shared-prompt fast path against the plain path, and the KV-cached sampler against an uncached one
and against teacher-forced log-probs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sandbox.core.sampling import SamplingChain
from sandbox.policies.transformer import SMALL_ATTENTION, Transformer, attention

pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_parameter_count_at_the_spec_size():
    model = Transformer(vocab=2, context=20)  # reversal H = 10: prompt 10 + answer 10, as the reference
    D, F, L = 64, 128, 3
    per_layer = D + 3 * D * D + D * D + D + D * F + F * D  # two LN scales, qkv, out, up, down
    assert model.n_params() == 2 * D + 20 * D + L * per_layer + D * 2 == 100_224
    params = model.init(3, _gen())
    assert sum(p[0].numel() for p in params) == 100_224
    assert all(p.shape[0] == 3 for p in params)


def test_no_biases_and_gain_only_layer_norms():
    specs = Transformer(vocab=2, context=19).param_specs()
    assert not any("bias" in name for name, _ in specs)
    one_d = [name for name, shape in specs if len(shape) == 1]
    assert one_d == [f"l{i}.{g}" for i in range(3) for g in ("ln1", "ln2")]  # only the 6 LN gains, no final LN


def test_reference_initialisation_is_flax_default():
    """Embeddings N(0, 1/D); kernels LeCun-normal: std 1/√fan_in, truncated at 2/(0.8796·√fan_in)."""
    model = Transformer(vocab=2, context=20)
    assert model.variant == "reference"
    named = model.named(model.init(256, _gen()))
    assert torch.equal(named["l0.ln1"], torch.ones(256, 64))
    for name in ("tok_emb", "pos_emb"):
        assert abs(named[name].std().item() - 1 / 8) < 2e-3
        assert named[name].abs().max() > 2.5 / 8  # a plain normal: not truncated
    for name, fan_in in (("l0.w_qkv", 64), ("l1.w_o", 64), ("l2.w_up", 64), ("l2.w_down", 128), ("unembed", 64)):
        std = 1 / math.sqrt(fan_in)
        w = named[name]
        assert abs(w.std().item() - std) < 0.02 * std, name
        bound = 2 * std / 0.87962566103423978
        assert w.abs().max() <= bound and w.abs().max() > 0.99 * bound, name
        assert abs(w.mean().item()) < 0.01 * std


def test_initialisation_is_deterministic_given_the_generator():
    for variant in ("reference", "gpt2"):
        model = Transformer(vocab=2, context=6, variant=variant)
        a, b = model.init(2, _gen(7)), model.init(2, _gen(7))
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_gpt2_initialisation_scales():
    model = Transformer(vocab=2, context=19, variant="gpt2")
    named = model.named(model.init(64, _gen()))
    assert torch.equal(named["l0.ln1"], torch.ones(64, 64))
    assert abs(named["l1.w_qkv"].std().item() - 0.02) < 5e-4
    assert abs(named["l2.w_down"].std().item() - 0.02 / math.sqrt(6)) < 2e-4
    assert abs(named["unembed"].std().item() - 0.02) < 2e-3


class _Block(nn.Module):
    """An independent pre-LN reference block: x + Attn(LN(x)), x + MLP(LN(x)); no biases."""

    def __init__(self, D, H, F, eps, act):
        super().__init__()
        self.act = act
        self.ln1, self.ln2 = nn.LayerNorm(D, eps=eps, bias=False), nn.LayerNorm(D, eps=eps, bias=False)
        self.attn = nn.MultiheadAttention(D, H, bias=False, batch_first=True)
        self.up, self.down = nn.Linear(D, F, bias=False), nn.Linear(F, D, bias=False)

    def forward(self, x):
        L = x.shape[1]
        causal = torch.ones(L, L, dtype=torch.bool).triu(1)
        a = self.ln1(x)
        x = x + self.attn(a, a, a, attn_mask=causal, need_weights=False)[0]
        return x + self.down(self.act(self.up(self.ln2(x))))


ACTIVATION = {"reference": (1e-6, torch.relu), "gpt2": (1e-5, nn.functional.gelu)}


def _reference_logits(model: Transformer, params, tokens):
    """nn.Module reference for member 0 — token + position embeddings, pre-LN blocks, and the
    unembedding applied to the residual stream with no final LayerNorm."""
    named = {k: v[0] for k, v in model.named(params).items()}
    D = model.width
    x = named["tok_emb"][tokens] + named["pos_emb"][: tokens.shape[-1]]
    for i in range(model.layers):
        block = _Block(D, model.heads, model.mlp, *ACTIVATION[model.variant]).double()
        with torch.no_grad():
            block.ln1.weight.copy_(named[f"l{i}.ln1"])
            block.ln2.weight.copy_(named[f"l{i}.ln2"])
            block.attn.in_proj_weight.copy_(named[f"l{i}.w_qkv"].T)
            block.attn.out_proj.weight.copy_(named[f"l{i}.w_o"].T)
            block.up.weight.copy_(named[f"l{i}.w_up"].T)
            block.down.weight.copy_(named[f"l{i}.w_down"].T)
        x = block(x)
    return x @ named["unembed"]


@pytest.mark.parametrize("variant", ["reference", "gpt2"])
def test_architecture_matches_an_independent_nn_module(variant):
    model = Transformer(vocab=3, context=7, init_std=0.3, variant=variant)
    params = model.init(1, _gen(), torch.float64)
    tokens = torch.randint(0, 3, (1, 5, 7), generator=_gen(1))
    ours = model.logits(params, tokens)[0]
    ref = _reference_logits(model, params, tokens[0])
    assert torch.allclose(ours, ref, atol=1e-10)


def test_no_final_layer_norm():
    """With the blocks' residual writes zeroed the logits are (tok + pos) @ unembed, unnormalised."""
    model = Transformer(vocab=2, context=4)
    named = model.named(model.init(1, _gen(), torch.float64))
    for i in range(model.layers):
        named[f"l{i}.w_o"].zero_()
        named[f"l{i}.w_down"].zero_()
    named["tok_emb"].mul_(50.0)  # a final LayerNorm would undo this scale
    tokens = torch.tensor([[[0, 1, 1, 0]]])
    params = list(named.values())
    want = (named["tok_emb"][0][tokens[0, 0]] + named["pos_emb"][0]) @ named["unembed"][0]
    assert torch.allclose(model.logits(params, tokens)[0, 0], want, atol=1e-12)


def test_population_members_are_independent():
    model = Transformer(vocab=3, context=9, width=16, heads=2, layers=2, mlp=32, init_std=0.2)
    params = model.init(3, _gen())
    tokens = torch.randint(0, 3, (3, 4, 9), generator=_gen(1))
    together = model.logits(params, tokens)
    alone = model.logits([p[1:2] for p in params], tokens[1:2])
    assert torch.allclose(together[1:2], alone, atol=1e-6)


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_shared_prompt_path_equals_the_plain_path_values_and_gradients(dtype, atol):
    model = Transformer(vocab=3, context=9, init_std=0.1)
    params = [p.requires_grad_(True) for p in model.init(2, _gen(), dtype)]
    prompts = torch.randint(0, 3, (2, 4, 5), generator=_gen(1))
    answers = torch.randint(0, 3, (2, 12, 5), generator=_gen(2))
    fast = model.answer_logp(params, prompts, answers, share_prompts=True)
    plain = model.answer_logp(params, prompts, answers, share_prompts=False)
    assert torch.allclose(fast, plain, atol=atol)
    weights = torch.randn(fast.shape, generator=_gen(3), dtype=dtype)
    g_fast = torch.autograd.grad((weights * fast).sum(), params)
    g_plain = torch.autograd.grad((weights * plain).sum(), params)
    for a, b in zip(g_fast, g_plain):
        assert torch.allclose(a, b, atol=atol * 10, rtol=1e-4)


@pytest.mark.parametrize("Lq, Lk, causal", [(3, 3, True), (1, 3, False), (2, 5, False), (4, 4, True)])
def test_explicit_attention_equals_sdpa(Lq, Lk, causal):
    """Short contexts take the explicit path; it equals torch's SDPA, values and gradients."""
    assert Lk <= SMALL_ATTENTION
    g = _gen(4)
    q, k, v = (torch.randn(6, 2, L, 8, generator=g, dtype=torch.float64, requires_grad=True) for L in (Lq, Lk, Lk))
    mask = None if causal else torch.ones(Lq, Lk, dtype=torch.bool).tril(Lk - Lq)
    ours = attention(q, k, v, mask, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert torch.allclose(ours, ref, atol=1e-12)
    w = torch.randn(ours.shape, generator=g, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad((w * ours).sum(), (q, k, v)), torch.autograd.grad((w * ref).sum(), (q, k, v))):
        assert torch.allclose(a, b, atol=1e-12)


def test_single_token_answers():
    model = Transformer(vocab=10, context=11)
    params = model.init(1, _gen())
    prompts = torch.randint(0, 10, (1, 3, 11), generator=_gen(1))
    out = model.sample(params, prompts, 4, 1, _gen(2))
    assert out.actions.shape == (1, 12, 1)
    assert torch.allclose(out.logp, model.answer_logp(params, prompts, out.actions), atol=1e-6)


@pytest.mark.parametrize("variant, init_std", [("reference", 0.02), ("gpt2", 0.02), ("gpt2", 0.1)])
def test_cached_sampler_equals_uncached_and_teacher_forced(variant, init_std):
    """fp32: the KV-cached sampler draws exactly the tokens of the uncached one (same uniforms)
    and its log-probs equal a teacher-forced recompute to ~1e-6 (relative, for large |log π|)."""
    model = Transformer(vocab=2, context=20, init_std=init_std, variant=variant)
    params = model.init(1, _gen())
    prompts = torch.randint(0, 2, (1, 10, 10), generator=_gen(1))
    cached = model.sample(params, prompts, 10, 10, _gen(5))
    uncached = model.sample(params, prompts, 10, 10, _gen(5), cache=False)
    assert torch.equal(cached.actions, uncached.actions)
    assert torch.allclose(cached.logp, uncached.logp, atol=1e-6)
    forced = model.answer_logp(params, prompts, cached.actions)
    assert torch.allclose(cached.logp, forced, atol=2e-6, rtol=1e-6)
    assert (cached.actions == 0).any() and (cached.actions == 1).any()


def test_sampler_hooks_temperature_and_eps():
    """The sampler records the log-prob of the distribution it drew from: temperature, logit hook
    and ε-mixing applied to the teacher-forced logits give the same numbers."""
    model = Transformer(vocab=3, context=6, init_std=0.3)
    params = model.init(1, _gen(), torch.float64)
    prompts = torch.randint(0, 3, (1, 2, 3), generator=_gen(1))
    shift = torch.tensor([0.5, -1.0, 0.0], dtype=torch.float64)
    out = model.sample(params, prompts, 5, 4, _gen(2), chain=SamplingChain(temperature=0.7, eps=0.2, logits_hook=lambda z: z + shift))
    ref = model.sample(params, prompts, 5, 4, _gen(2), chain=SamplingChain(temperature=0.7, eps=0.2, logits_hook=lambda z: z + shift),
                       cache=False)
    assert torch.equal(out.actions, ref.actions)
    logits = model.answer_logits(params, prompts, out.actions) / 0.7 + shift
    probs = 0.8 * torch.softmax(logits, -1) + 0.2 / 3
    want = torch.log(probs).gather(-1, out.actions.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(out.logp, want, atol=1e-12)


def test_sample_frequencies_match_the_policy():
    """4000 answers of length 2 to one prompt: each answer's frequency matches exp(Σ log-probs)."""
    model = Transformer(vocab=2, context=3, init_std=0.5)
    params = model.init(1, _gen(3), torch.float64)
    prompts = torch.tensor([[[1, 0]]])
    out = model.sample(params, prompts, 4000, 2, _gen(4))
    answers = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]).unsqueeze(0)
    p = model.answer_logp(params, prompts, answers).sum(-1).exp()[0]
    idx = out.actions[0, :, 0] * 2 + out.actions[0, :, 1]
    freq = torch.bincount(idx, minlength=4).double() / 4000
    assert torch.all((freq - p).abs() <= 5 * torch.sqrt(p * (1 - p) / 4000)), (freq, p)


def test_sampling_is_deterministic_given_the_generator():
    model = Transformer(vocab=2, context=9)
    params = model.init(1, _gen())
    prompts = torch.randint(0, 2, (1, 3, 5), generator=_gen(1))
    a = model.sample(params, prompts, 4, 5, _gen(9))
    b = model.sample(params, prompts, 4, 5, _gen(9))
    assert torch.equal(a.actions, b.actions) and torch.equal(a.logp, b.logp)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="variant must be one of"):
        Transformer(vocab=2, context=4, variant="bert")
    with pytest.raises(ValueError, match="width must be divisible by heads"):
        Transformer(vocab=2, context=4, width=10, heads=4)
    with pytest.raises(ValueError, match=r"vocab must lie in \[2, inf\]"):
        Transformer(vocab=1, context=4)
    model = Transformer(vocab=2, context=5)
    params = model.init(1, _gen())
    with pytest.raises(ValueError, match="exceeds the context"):
        model.sample(params, torch.zeros(1, 1, 4, dtype=torch.long), 2, 3, _gen())
    with pytest.raises(ValueError, match="must hold 21 tensors"):
        model.logits(params[:-1], torch.zeros(1, 1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature must lie in"):
        model.sample(params, torch.zeros(1, 1, 2, dtype=torch.long), 2, 2, _gen(), chain=SamplingChain(temperature=0.0))
