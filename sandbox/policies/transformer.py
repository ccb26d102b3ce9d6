"""A tiny decoder-only transformer in functional form over population parameters, with a
KV-cached batched sampler (shared/spec/environments.md, "Synthetic transformer sequence tasks").

The default ``variant='reference'`` is the model of the Delightful papers' reference code
(google-deepmind/egg, ``egg/networks/transformers.py``, Flax): token + learned absolute position
embeddings; ``layers`` pre-LayerNorm blocks (x ← x + Attn(LN(x)), x ← x + MLP(LN(x)), causal
multi-head attention with logits scaled by 1/√head_dim, **ReLU** MLP); no biases anywhere;
LayerNorms with a scale only, eps 1e-6; **no final LayerNorm** — the unembedding reads the
residual stream. Initialisation as Flax's defaults: embeddings N(0, 1/D) (``nn.Embed``); every
dense and attention kernel LeCun-normal, a normal truncated at ±2σ rescaled to variance 1/fan_in
(``nn.Dense``, ``nn.MultiHeadDotProductAttention``); LayerNorm scales 1. Width 64, 4 heads,
3 layers, MLP 128 and a context of P + A = 20 positions (reversal, H = 10, V = 2): 100,224
parameters, as the reference. ``variant='gpt2'`` (Radford et al. 2019) is the GELU MLP, LayerNorm
eps 1e-5 and N(0, init_std²) weights, the residual writes (attention out, MLP down) scaled by
1/√(2L); it learns the H = 10 reversal several times more slowly.

Parameters are a list of tensors with a leading population axis ``[S, ...]`` (S seeds as one
batched computation; S = 1 for one seed), in the order of ``Transformer.param_specs()``. A sequence
is the plain concatenation [prompt ; answer] (no special tokens); the logits at positions
P − 1 … P + A − 2 predict the A answer tokens (the last of the P + A positions is never read).

Two teacher-forced paths give the same numbers up to float rounding (tested): ``logits`` runs
every row over the whole sequence (the plain reference); ``answer_logits`` runs the prompt of each
group once and only the answers per row. ``sample`` draws answers with a KV cache; its per-token
log-probs equal a teacher-forced recompute (tested to 1e-6 in fp32) and its tokens those of an
uncached sampler. Attention over short contexts (≤ ``SMALL_ATTENTION`` keys) is an explicit
broadcast product, longer ones PyTorch's SDPA (tested equal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from sandbox.core.sampling import IDENTITY, SamplingChain
from sandbox.core.validation import check_choice, check_int, check_range, check_tensor
from sandbox.policies.decode import Decoded, Versions, decode, upfront
from sandbox.policies.transformer_variants import VARIANTS, Variant


def _bmm(x: Tensor, w: Tensor) -> Tensor:
    """``x [S, ..., D] @ w [S, D, F]`` → ``[S, ..., F]`` (one batched matmul over the population)."""
    S = x.shape[0]
    return torch.bmm(x.reshape(S, -1, x.shape[-1]), w).reshape(*x.shape[:-1], w.shape[-1])


#: contexts up to this many keys use the explicit attention (faster than SDPA's kernels there)
SMALL_ATTENTION = 8


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
    """softmax(q·kᵀ/√d + mask)·v for ``q [N, h, Lq, d]``, ``k, v [N, h, Lk, d]``; ``mask [Lq, Lk]``
    bool (True = attend) or ``causal``. Short contexts (Lk ≤ SMALL_ATTENTION) use an explicit
    broadcast product (PyTorch's SDPA kernels pay a per-head overhead that dominates there);
    longer ones ``F.scaled_dot_product_attention``. Both agree to float rounding (tested)."""
    Lq, Lk = q.shape[-2], k.shape[-2]
    if Lk > SMALL_ATTENTION:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    if causal:
        mask = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril(Lk - Lq)
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) * (1.0 / math.sqrt(q.shape[-1]))  # [N, h, Lq, Lk]
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return (torch.softmax(scores, -1).unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)


@dataclass(frozen=True)
class Transformer:
    """Configuration and functional forward passes of the tiny transformer.

    vocab: vocabulary size V ≥ 2. context: number of positions (at least P + A − 1 for prompt
    length P and answer length A; the reference, and the sequence tasks, use P + A). width, heads, layers, mlp: the architecture (width divisible by heads).
    variant: 'reference' (the egg model: ReLU, Flax initialisers, LayerNorm eps 1e-6) or 'gpt2'
    (GELU, N(0, init_std²) weights with the residual projections scaled by 1/√(2L), eps 1e-5).
    init_std: the gpt2 variant's weight std (unused by 'reference').
    """

    vocab: int
    context: int
    width: int = 64
    heads: int = 4
    layers: int = 3
    mlp: int = 128
    init_std: float = 0.02
    variant: str = "reference"

    def __post_init__(self) -> None:
        check_int("vocab", self.vocab, low=2)
        check_int("context", self.context, low=1)
        check_int("width", self.width, low=1)
        check_int("heads", self.heads, low=1)
        check_int("layers", self.layers, low=1)
        check_int("mlp", self.mlp, low=1)
        check_range("init_std", self.init_std, low=0.0, low_open=True)
        check_choice("variant", self.variant, tuple(VARIANTS))
        if self.width % self.heads:
            raise ValueError(f"width must be divisible by heads, got width={self.width}, heads={self.heads}")

    # ------------------------------------------------------------------ parameters
    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def param_specs(self) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape without the population axis), in the order of the parameter list."""
        D, F_, V = self.width, self.mlp, self.vocab
        specs = [("tok_emb", (V, D)), ("pos_emb", (self.context, D))]
        for i in range(self.layers):
            specs += [(f"l{i}.ln1", (D,)), (f"l{i}.w_qkv", (D, 3 * D)), (f"l{i}.w_o", (D, D)),
                      (f"l{i}.ln2", (D,)), (f"l{i}.w_up", (D, F_)), (f"l{i}.w_down", (F_, D))]
        specs.append(("unembed", (D, V)))
        return specs

    def n_params(self) -> int:
        return sum(math.prod(shape) for _, shape in self.param_specs())

    def init(self, population: int, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> list[Tensor]:
        """The variant's initialisation, one independent draw per population member: ``[S, ...]`` each."""
        check_range("population", population, low=1)
        init = VARIANTS[self.variant].init
        return [init(self, name, shape, population, generator, dtype) for name, shape in self.param_specs()]

    def named(self, params: Sequence[Tensor]) -> dict[str, Tensor]:
        specs = self.param_specs()
        if len(params) != len(specs):
            raise ValueError(f"params must hold {len(specs)} tensors (Transformer.param_specs()), got {len(params)}")
        for (name, shape), p in zip(specs, params):
            if tuple(p.shape[1:]) != shape:
                raise ValueError(f"parameter {name} must have shape [S, {', '.join(map(str, shape))}], got {tuple(p.shape)}")
        return dict(zip((n for n, _ in specs), params))

    def _blocks(self, params: Sequence[Tensor]) -> tuple[Tensor, Tensor, list[tuple[Tensor, ...]], Tensor]:
        """(tok_emb, pos_emb, per layer (W_qkv·diag-gain folded, W_o, W_up folded, W_down), unembed).

        A gain-only LayerNorm followed by a linear map is LN(x)·g @ W = LN(x) @ (g ⊙ W): the gain is
        folded into the weight (one product on a D × F matrix instead of one per activation)."""
        named = self.named(params)
        blocks = []
        for i in range(self.layers):
            g1, g2 = named[f"l{i}.ln1"], named[f"l{i}.ln2"]
            blocks.append((g1.unsqueeze(-1) * named[f"l{i}.w_qkv"], named[f"l{i}.w_o"],
                           g2.unsqueeze(-1) * named[f"l{i}.w_up"], named[f"l{i}.w_down"]))
        return named["tok_emb"], named["pos_emb"], blocks, named["unembed"]

    def _embed(self, tok_emb: Tensor, pos_emb: Tensor, tokens: Tensor, start: int) -> Tensor:
        """``tokens [S, ..., L]`` at positions start … start + L − 1 → ``[S, ..., L, D]``."""
        S, D = tok_emb.shape[0], self.width
        L = tokens.shape[-1]
        flat = tokens.reshape(S, -1)
        h = tok_emb.gather(1, flat.unsqueeze(-1).expand(*flat.shape, D)).reshape(*tokens.shape, D)
        pos = pos_emb[:, start : start + L]
        return h + pos.reshape(S, *([1] * (tokens.ndim - 2)), L, D)

    def _split_heads(self, qkv: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``[S, N, L, 3D]`` → q, k, v each ``[S·N, heads, L, d]``."""
        S, N, L, _ = qkv.shape
        q, k, v = qkv.reshape(S * N, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return q, k, v

    def _merge_heads(self, o: Tensor, S: int) -> Tensor:
        """``[S·N, heads, L, d]`` → ``[S, N, L, D]``."""
        SN, _, L, _ = o.shape
        return o.transpose(1, 2).reshape(S, SN // S, L, self.width)

    def _norm(self, x: Tensor) -> Tensor:
        """LayerNorm without its gain (folded into the next weight), the variant's eps."""
        return F.layer_norm(x, x.shape[-1:], eps=VARIANTS[self.variant].ln_eps)

    def _mlp(self, h: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
        return _bmm(VARIANTS[self.variant].activation(_bmm(self._norm(h), w_up)), w_down)

    # ------------------------------------------------------------------ teacher-forced passes
    def logits(self, params: Sequence[Tensor], tokens: Tensor) -> Tensor:
        """The plain reference: ``tokens [S, N, L]`` (L ≤ context) → next-token logits ``[S, N, L, V]``."""
        check_tensor("tokens", tokens, dtype="int", ndim=3)
        if tokens.shape[-1] > self.context:
            raise ValueError(f"tokens must have at most context={self.context} positions, got {tokens.shape[-1]}")
        tok_emb, pos_emb, blocks, unembed = self._blocks(params)
        S = tokens.shape[0]
        h = self._embed(tok_emb, pos_emb, tokens, 0)
        for w_qkv, w_o, w_up, w_down in blocks:
            q, k, v = self._split_heads(_bmm(self._norm(h), w_qkv))
            h = h + _bmm(self._merge_heads(attention(q, k, v, causal=True), S), w_o)
            h = h + self._mlp(h, w_up, w_down)
        return _bmm(h, unembed)

    def reference_answer_logits(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor) -> Tensor:
        """Answer logits by the plain path: every row runs [prompt ; answer[:-1]] in full.
        ``prompts [S, G, P]``, ``answers [S, G·M, A]`` (rows grouped by prompt) → ``[S, G·M, A, V]``."""
        S, G, P = prompts.shape
        B, A = answers.shape[-2:]
        rows = prompts.repeat_interleave(B // G, dim=1)
        tokens = torch.cat([rows, answers[..., : A - 1]], -1)
        return self.logits(params, tokens)[:, :, P - 1 :]

    def answer_logits(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor,
                      groups: Tensor | None = None) -> Tensor:
        """Teacher-forced answer logits ``[S, B, A, V]`` with the prompt of each group run once.

        ``prompts [S, G, P]``; ``answers [S, B, A]``. By default the B = G·M rows are grouped by
        prompt (row g·M + m answers prompt g); ``groups [S, B]`` names any prompt per row instead
        (e.g. a subset of rows). The answer positions attend to their prompt's keys and values
        (computed once per prompt) and causally to their own answer."""
        S, G, P = prompts.shape
        check_tensor("answers", answers, dtype="int", ndim=3)
        B, A = answers.shape[-2:]
        if groups is None and (answers.shape[0] != S or B % G):
            raise ValueError(f"answers must have shape [S={S}, G·M, A] with G={G} groups, got {tuple(answers.shape)}")
        if groups is not None:
            check_tensor("groups", groups, dtype="int", ndim=2)
            if tuple(groups.shape) != (S, B) or bool((groups < 0).any() | (groups >= G).any()):
                raise ValueError(f"groups must have shape [S={S}, B={B}] with values in [0, {G}), got "
                                 f"{tuple(groups.shape)}")
        if P + A - 1 > self.context:
            raise ValueError(f"prompt {P} + answer {A} − 1 exceeds the context of {self.context} positions")

        def per_row(x: Tensor) -> Tensor:
            """``[S, G, ...]`` → ``[S, B, ...]``: each row gets its prompt's entry."""
            if groups is None:
                return x.unsqueeze(2).expand(S, G, B // G, *x.shape[2:]).reshape(S, B, *x.shape[2:])
            return x.gather(1, groups.reshape(S, B, *([1] * (x.ndim - 2))).expand(S, B, *x.shape[2:]))

        tok_emb, pos_emb, blocks, unembed = self._blocks(params)
        hp = self._embed(tok_emb, pos_emb, prompts, 0)  # [S, G, P, D]
        ha = self._embed(tok_emb, pos_emb, answers[..., : A - 1], P) if A > 1 else None  # [S, B, A − 1, D]
        if ha is not None:
            # answer queries see every prompt key and the answer keys up to their own position
            causal = torch.ones(A - 1, A - 1, dtype=torch.bool, device=hp.device).tril()
            mask = torch.cat([torch.ones(A - 1, P, dtype=torch.bool, device=hp.device), causal], -1)
        h, d = self.heads, self.head_dim
        for w_qkv, w_o, w_up, w_down in blocks:
            qp, kp, vp = self._split_heads(_bmm(self._norm(hp), w_qkv))  # [S·G, h, P, d]
            op = attention(qp, kp, vp, causal=True)
            if ha is not None:
                qa, ka, va = self._split_heads(_bmm(self._norm(ha), w_qkv))  # [S·B, h, A − 1, d]
                keys = torch.cat([per_row(kp.reshape(S, G, h, P, d)).reshape(S * B, h, P, d), ka], 2)
                values = torch.cat([per_row(vp.reshape(S, G, h, P, d)).reshape(S * B, h, P, d), va], 2)
                oa = attention(qa, keys, values, mask)
                ha = ha + _bmm(self._merge_heads(oa, S), w_o)
                ha = ha + self._mlp(ha, w_up, w_down)
            hp = hp + _bmm(self._merge_heads(op, S), w_o)
            hp = hp + self._mlp(hp, w_up, w_down)
        first = per_row(_bmm(hp[:, :, -1], unembed)).unsqueeze(2)  # [S, B, 1, V]: from the last prompt position
        if ha is None:
            return first
        return torch.cat([first, _bmm(ha, unembed)], 2)

    def answer_logp(self, params: Sequence[Tensor], prompts: Tensor, answers: Tensor, share_prompts: bool = True,
                    groups: Tensor | None = None) -> Tensor:
        """log π(a_t | prompt, a_<t) of the given answers, ``[S, B, A]`` (``groups`` as in
        ``answer_logits``; the plain path ``share_prompts=False`` needs the default grouping)."""
        if share_prompts:
            logits = self.answer_logits(params, prompts, answers, groups)
        elif groups is None:
            logits = self.reference_answer_logits(params, prompts, answers)
        else:
            raise ValueError("groups needs share_prompts=True")
        return torch.log_softmax(logits, -1).gather(-1, answers.unsqueeze(-1)).squeeze(-1)

    # ------------------------------------------------------------------ sampling
    def sample(self, params: Sequence[Tensor], prompts: Tensor, samples_per_prompt: int, answer_len: int,
               generator: torch.Generator, chain: SamplingChain = IDENTITY, cache: bool = True,
               versions: Versions | None = None, eos: int | None = None) -> Decoded:
        """Draw ``samples_per_prompt`` answers of ``answer_len`` tokens for each prompt ``[S, G, P]``
        through the one decode loop (``sandbox.policies.decode``), on one uniform per token drawn
        first (``[S, B, A]``): answers ``actions [S, B, A]`` and their log-probs ``logp``.

        ``cache=False`` recomputes the prefix teacher-forced at every token (the reference the KV
        cache is tested against); ``versions`` (default ``params`` at every position) decodes each
        position with its version's parameters, a resumed rollout, which needs ``cache=False``.
        With ``eos`` a row stops at its first EOS (later positions: token 0, log-prob 0).
        Runs under ``torch.no_grad``."""
        check_tensor("prompts", prompts, dtype="int", ndim=3)
        check_range("samples_per_prompt", samples_per_prompt, low=1)
        check_range("answer_len", answer_len, low=1)
        S, G, P = prompts.shape
        M, A = samples_per_prompt, answer_len
        if P + A - 1 > self.context:
            raise ValueError(f"prompt {P} + answer {A} − 1 exceeds the context of {self.context} positions")
        versions = Versions.single(params, A) if versions is None else versions
        if len(versions.stamps) != A:
            raise ValueError(f"versions must stamp the {A} answer positions, got {len(versions.stamps)}")
        with torch.no_grad():
            dtype = versions.first[0].dtype  # of the uniforms and the recorded log-probs
            # drawn by the (CPU) generator, then moved: the same draws on every device
            uniforms = torch.rand(S, G * M, A, generator=generator, dtype=dtype).to(prompts.device)
            steps = _Cached(self, prompts, M, A) if cache else _Forced(self, prompts, A)
            return decode(steps, versions, chain, upfront(uniforms), (S, G * M), dtype=dtype, device=prompts.device,
                          eos=eos)


class _Forced:
    """Teacher-forced steps: position t runs [prompt ; a_<t ; 0 …] through ``answer_logits`` under
    any version's parameters (the zeros after t are never attended to)."""

    def __init__(self, model: Transformer, prompts: Tensor, A: int) -> None:
        self.model, self.prompts, self.A = model, prompts, A

    def __call__(self, params: Sequence[Tensor], answered: Tensor) -> Tensor:
        t = answered.shape[-1]
        return self.model.answer_logits(params, self.prompts, F.pad(answered, (0, self.A - t)))[:, :, t]


class _Cached:
    """KV-cached steps: the prompt of each group is run once (prefill, at t = 0) and its keys and
    values are broadcast into every row's cache; each later token runs one position. The cache
    holds one version's keys: the parameters may not change within a rollout."""

    def __init__(self, model: Transformer, prompts: Tensor, M: int, A: int) -> None:
        self.model, self.prompts, self.M, self.A = model, prompts, M, A
        self.params: Sequence[Tensor] | None = None

    def __call__(self, params: Sequence[Tensor], answered: Tensor) -> Tensor:
        if answered.shape[-1] == 0:
            return self._prefill(params)
        if params is not self.params:
            raise ValueError("a KV cache holds one version's keys and values: decode a resumed rollout with cache=False")
        return self._next(answered)

    def _prefill(self, params: Sequence[Tensor]) -> Tensor:
        model, prompts, M = self.model, self.prompts, self.M
        self.params = params
        self.tok_emb, self.pos_emb, self.blocks, self.unembed = model._blocks(params)
        S, G, P = prompts.shape
        self.S, self.B, self.P = S, G * M, P
        h, d, L = model.heads, model.head_dim, P + self.A - 1
        self.keys = [torch.empty(S, G, M, h, L, d, dtype=self.unembed.dtype, device=self.unembed.device)
                     for _ in self.blocks]
        self.values = [torch.empty_like(k) for k in self.keys]
        x = model._embed(self.tok_emb, self.pos_emb, prompts, 0)  # [S, G, P, D]
        for (w_qkv, w_o, w_up, w_down), kc, vc in zip(self.blocks, self.keys, self.values):
            q, k, v = model._split_heads(_bmm(model._norm(x), w_qkv))  # [S·G, h, P, d]
            kc[..., :P, :] = k.reshape(S, G, 1, h, P, d)
            vc[..., :P, :] = v.reshape(S, G, 1, h, P, d)
            x = x + _bmm(model._merge_heads(attention(q, k, v, causal=True), S), w_o)
            x = x + model._mlp(x, w_up, w_down)
        self.keys = [k.view(S * self.B, h, L, d) for k in self.keys]
        self.values = [v.view(S * self.B, h, L, d) for v in self.values]
        last = _bmm(x[:, :, -1], self.unembed)  # [S, G, V]
        return last.unsqueeze(2).expand(S, G, M, model.vocab).reshape(S, self.B, model.vocab)

    def _next(self, answered: Tensor) -> Tensor:
        """Logits ``[S, B, V]`` for the token after ``answered [S, B, t]`` (only the last is run)."""
        model, S, B = self.model, self.S, self.B
        pos = self.P + answered.shape[-1] - 1
        x = model._embed(self.tok_emb, self.pos_emb, answered[..., -1:], pos).reshape(S, B, model.width)
        h, d = model.heads, model.head_dim
        for (w_qkv, w_o, w_up, w_down), kc, vc in zip(self.blocks, self.keys, self.values):
            q, k, v = _bmm(model._norm(x), w_qkv).reshape(S * B, 3, h, 1, d).unbind(1)
            kc[:, :, pos : pos + 1] = k
            vc[:, :, pos : pos + 1] = v
            o = attention(q, kc[:, :, : pos + 1], vc[:, :, : pos + 1])
            x = x + _bmm(o.reshape(S, B, model.width), w_o)
            x = x + model._mlp(x, w_up, w_down)
        return _bmm(x, self.unembed)


__all__ = ["SMALL_ATTENTION", "VARIANTS", "Transformer", "Variant", "attention"]
