"""Any ``transformers`` causal LM as a policy: sampling with a KV cache, teacher-forced log-probs
through the fused kernel, and the ``hf_text`` task that trains it with the generic loop.

Model: a local checkpoint (``load_causal_lm(path)``; nothing is ever downloaded) or a tiny random
Qwen2- or Llama-style config built in code (``tiny_causal_lm``), initialised from an explicit seed.

Sampling (``sample_completions``): prompts are left-padded; each step takes the last position's
logits z, divides them by the temperature τ, applies the actor's hooks, and draws a_t ~ softmax(z/τ)
by inverse CDF with an explicit generator; the recorded behaviour log-prob is that of the
distribution actually sampled from. A row stops at EOS (kept, mask True); later positions hold
``pad_id`` with mask False and log-prob 0.

Learner (``completion_logp``): log π(a_t | prompt, a_<t) = log_softmax(h_t Wᵀ/τ)[a_t] with h_t the
backbone's last hidden state before a_t and W the output embedding (tied or not), computed by
``sandbox.kernels.fused_logprob`` without the [N, V] logits (``method='fused'``) or from the
model's full logits (``method='naive'``, the reference).

Task (``hf_text``): the generic loop differentiates w.r.t. ``init_params`` — the model's parameters,
each with a leading population axis of size 1 ([1, *shape]); the learner reads them through
``torch.func.functional_call`` (so gradients reach those leaves), the actor copies the (possibly
stale) parameters into a cached module of the sampler's dtype. One model per run: ``population``
must be 1; seeds are separate runs.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from sandbox.advantages import Advantage, compute_advantages
from sandbox.estimators.base import Estimator, PGTerms, sequence_log_ratio
from sandbox.frictions.base import FrictionContext, FrictionStack, Sample
from sandbox.frictions.precision import k3_kl
from sandbox.kernels import BACKENDS, fused_logprob
from sandbox.rollout import Rollout
from sandbox.runtime.task import Task, register_task
from sandbox.validation import check_choice, check_range, check_tensor

log = logging.getLogger(__name__)

ARCHS = ("qwen2", "llama")
DTYPES = ("float32", "float64", "bfloat16")
LOGPROB_METHODS = ("fused", "naive")


# ----------------------------------------------------------------------------- models
def tiny_causal_lm(vocab_size: int, hidden: int = 64, layers: int = 2, heads: int = 4, *, arch: str = "qwen2",
                   intermediate: int | None = None, kv_heads: int | None = None, tie_embeddings: bool = False,
                   max_positions: int = 512, seed: int | torch.Generator = 0,
                   attn_implementation: str = "sdpa") -> nn.Module:
    """A random Qwen2- or Llama-style causal LM built from a config in code (no download).

    Every parameter is drawn from ``seed`` (an int or a torch.Generator) the way the library
    initialises these models: linear and embedding weights ~ N(0, 0.02²), norm weights 1, biases 0;
    the global RNG is left untouched. ``intermediate`` defaults to 2·hidden, ``kv_heads`` to heads.
    """
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    check_range("vocab_size", vocab_size, low=2)
    check_range("hidden", hidden, low=1)
    check_range("layers", layers, low=1)
    check_range("heads", heads, low=1)
    check_choice("arch", arch, ARCHS)
    if hidden % heads:
        raise ValueError(f"hidden must be divisible by heads, got hidden={hidden}, heads={heads}")
    kv_heads = heads if kv_heads is None else kv_heads
    check_range("kv_heads", kv_heads, low=1)
    if heads % kv_heads:
        raise ValueError(f"heads must be divisible by kv_heads, got heads={heads}, kv_heads={kv_heads}")
    config_cls = Qwen2Config if arch == "qwen2" else LlamaConfig
    config = config_cls(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions, tie_word_embeddings=bool(tie_embeddings),
    )
    with torch.random.fork_rng(devices=[]):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))
    std = float(getattr(config, "initializer_range", 0.02))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif p.ndim == 1:  # RMSNorm weights
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std)
    return model.eval()


def load_causal_lm(path: str | Path, dtype: str = "float32") -> nn.Module:
    """A causal LM from a local checkpoint directory (``config.json`` + weights), never downloading."""
    from transformers import AutoModelForCausalLM

    check_choice("dtype", dtype, DTYPES)
    folder = Path(path)
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise ValueError(f"path must be a local checkpoint directory containing config.json, got {str(path)!r}")
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=getattr(torch, dtype))
    return model.eval()


def backbone(model: nn.Module) -> tuple[nn.Module, str]:
    """The decoder stack under the LM head and its attribute name (``model.model`` for Llama/Qwen2)."""
    prefix = getattr(model, "base_model_prefix", "")
    module = getattr(model, prefix, None) if prefix else None
    if module is None or module is model:
        raise ValueError(f"{type(model).__name__} has no backbone under base_model_prefix={prefix!r}; "
                         "use method='naive'")
    return module, prefix


def head_parameter_name(model: nn.Module) -> str:
    """Name (in ``named_parameters()``) of the LM head weight; the input embedding's name when tied."""
    head = model.get_output_embeddings()
    if head is None or not isinstance(getattr(head, "weight", None), Tensor):
        raise ValueError(f"{type(model).__name__} has no output embedding weight; use method='naive'")
    for name, p in model.named_parameters():
        if p is head.weight:
            return name
    raise ValueError("the LM head weight is not a parameter of the model; use method='naive'")


def check_fusable(model: nn.Module) -> None:
    """The fused path assumes logits = h Wᵀ: no head bias, no soft-capping, no logit scale."""
    head = model.get_output_embeddings()
    config = getattr(model, "config", None)
    if getattr(head, "bias", None) is not None:
        raise ValueError(f"{type(model).__name__}'s LM head has a bias; use method='naive'")
    for attr in ("final_logit_softcapping", "logit_scale", "output_multiplier_scale"):
        value = getattr(config, attr, None)
        if value not in (None, 1, 1.0):
            raise ValueError(f"{type(model).__name__} rescales its logits ({attr}={value}); use method='naive'")


# ----------------------------------------------------------------------------- sampling
def token_mask(actions: Int[Tensor, "*B T"], eos_id: int) -> Bool[Tensor, "*B T"]:
    """Generated tokens up to and including the first EOS (True); the padding after it (False)."""
    eos = (actions == eos_id).long()
    before = eos.cumsum(-1) - eos  # EOS tokens strictly before position t
    return before == 0


def sample_rows(probs: Float[Tensor, "B V"], generator: torch.Generator) -> Int[Tensor, " B"]:
    """One draw per row by inverse CDF on one uniform per row from ``generator`` (drawn on the
    generator's device, then moved to the rows'), so the same seed gives the same tokens anywhere."""
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=torch.float64).to(probs.device, probs.dtype)
    cdf = torch.cumsum(probs, -1)
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
    return idx.clamp(max=probs.shape[-1] - 1).squeeze(-1)


def _positions(attention: Tensor) -> Tensor:
    return (attention.long().cumsum(-1) - 1).clamp(min=0)


@dataclass(frozen=True)
class Completions:
    """Sampled tokens ``[B, T]`` (``pad_id`` after EOS), their behaviour log-probs (fp32, 0 where
    masked) and the mask of generated tokens."""

    tokens: Tensor
    logp: Tensor
    mask: Tensor


@torch.no_grad()
def sample_completions(
    model: nn.Module,
    prompt_ids: Int[Tensor, "B P"],
    prompt_mask: Bool[Tensor, "B P"],
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator,
    temperature: float = 1.0,
    logits_hook: Callable[[Tensor], Tensor] | None = None,
    probs_hook: Callable[[Tensor], Tensor] | None = None,
) -> Completions:
    """Autoregressive sampling with the KV cache (``past_key_values``) from left-padded prompts.

    Per step: z = logits/τ (in fp32) → ``logits_hook`` → p = softmax(z) → ``probs_hook`` → a ~ p by
    inverse CDF on one uniform of ``generator`` per row; logp = log p(a). Stops when every row has
    emitted EOS or after ``max_new_tokens``.
    """
    _check_prompts(prompt_ids, prompt_mask)
    check_range("max_new_tokens", max_new_tokens, low=1)
    check_range("temperature", temperature, low=0.0, low_open=True)
    B, device = prompt_ids.shape[0], prompt_ids.device
    attention = prompt_mask.long()
    out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=_positions(attention),
                use_cache=True, logits_to_keep=1)
    next_position = _positions(attention)[:, -1:] + 1
    stat = torch.promote_types(out.logits.dtype, torch.float32)  # fp32 (fp64 for an fp64 model)
    tokens = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logp = torch.zeros(B, max_new_tokens, dtype=stat, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    for t in range(max_new_tokens):
        logits = out.logits[:, -1].to(stat)
        if temperature != 1.0:
            logits = logits / temperature
        if logits_hook is not None:
            logits = logits_hook(logits)
        log_probs = torch.log_softmax(logits, -1)
        if probs_hook is not None:
            log_probs = torch.log(probs_hook(log_probs.exp()))
        token = sample_rows(log_probs.exp(), generator)
        lp = log_probs.gather(-1, token.unsqueeze(-1)).squeeze(-1)
        tokens[:, t] = torch.where(done, pad_id, token)
        logp[:, t] = torch.where(done, 0.0, lp)
        done = done | (token == eos_id)
        if t + 1 == max_new_tokens or bool(done.all()):
            break
        attention = torch.cat([attention, attention.new_ones(B, 1)], -1)
        out = model(input_ids=tokens[:, t : t + 1], attention_mask=attention, position_ids=next_position,
                    past_key_values=out.past_key_values, use_cache=True)
        next_position = next_position + 1
    return Completions(tokens=tokens, logp=logp, mask=token_mask(tokens, eos_id))


# ----------------------------------------------------------------------------- teacher forcing
def _call(module: nn.Module, params: dict[str, Tensor] | None, **kwargs):
    if params is None:
        return module(**kwargs)
    return torch.func.functional_call(module, params, args=(), kwargs=kwargs)


def _check_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> None:
    check_tensor("prompt_ids", prompt_ids, dtype="int", ndim=2)
    check_tensor("prompt_mask", prompt_mask, dtype="bool", ndim=2)
    if prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_mask must have shape {tuple(prompt_ids.shape)} (matching prompt_ids), "
                         f"got {tuple(prompt_mask.shape)}")
    if prompt_ids.shape[1] == 0 or not bool(prompt_mask[:, -1].all()):
        raise ValueError("prompts must be left-padded and non-empty: prompt_mask[:, -1] must be all True")


def completion_logp(
    model: nn.Module,
    prompt_ids: Int[Tensor, "B P"],
    prompt_mask: Bool[Tensor, "B P"],
    actions: Int[Tensor, "B T"],
    mask: Bool[Tensor, "B T"],
    *,
    params: dict[str, Tensor] | None = None,
    temperature: float = 1.0,
    method: str = "fused",
    chunk_size: int = 1024,
    backend: str = "auto",
) -> Float[Tensor, "B T"]:
    """Teacher-forced log π(a_t | prompt, a_<t) of the given completions, 0 where ``mask`` is False.

    One forward over [prompt ; actions] (attention on every prompt token that ``prompt_mask``
    keeps and on every action); ``params`` (name → tensor, as in ``named_parameters()``) replace
    the model's own through ``torch.func.functional_call``, so gradients reach them. ``method``:
    'fused' (backbone hidden states + ``fused_logprob`` on the valid tokens only) or 'naive'
    (``log_softmax`` of the model's full logits).
    """
    check_choice("method", method, LOGPROB_METHODS)
    check_range("temperature", temperature, low=0.0, low_open=True)
    _check_prompts(prompt_ids, prompt_mask)
    check_tensor("actions", actions, dtype="int", ndim=2)
    check_tensor("mask", mask, dtype="bool", ndim=2)
    if actions.shape[0] != prompt_ids.shape[0] or mask.shape != actions.shape:
        raise ValueError(f"actions and mask must have shape [B, T] with B={prompt_ids.shape[0]}, "
                         f"got {tuple(actions.shape)} and {tuple(mask.shape)}")
    P, T = prompt_ids.shape[1], actions.shape[1]
    ids = torch.cat([prompt_ids, actions], -1)
    attention = torch.cat([prompt_mask, torch.ones_like(mask)], -1).long()
    kwargs = dict(input_ids=ids, attention_mask=attention, position_ids=_positions(attention), use_cache=False)
    if method == "naive":
        logits = _call(model, params, **kwargs).logits[:, P - 1 : P + T - 1]
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        log_probs = torch.log_softmax(logits / temperature, -1)
        return log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, 0.0)
    check_fusable(model)
    body, prefix = backbone(model)
    head_name = head_parameter_name(model)
    if params is None:
        body_params, weight = None, dict(model.named_parameters())[head_name]
    else:
        cut = len(prefix) + 1
        body_params = {k[cut:]: v for k, v in params.items() if k.startswith(prefix + ".")}
        weight = params[head_name]
    hidden = _call(body, body_params, **kwargs).last_hidden_state[:, P - 1 : P + T - 1]
    rows = hidden[mask]
    if temperature != 1.0:
        rows = rows / temperature
    values = fused_logprob(rows, weight, actions[mask], chunk_size=chunk_size, backend=backend, ignore_index=None)
    return torch.zeros(mask.shape, dtype=values.dtype, device=values.device).masked_scatter(mask, values)


# ----------------------------------------------------------------------------- policy
class CausalLMPolicy:
    """A causal LM with parameters held outside it: ``parameters()`` gives copies with a population
    axis of 1, ``logp(params, ...)`` scores completions with them (differentiably) and
    ``actor(params)`` loads them into a cached module of their dtype for sampling."""

    def __init__(self, model: nn.Module, *, temperature: float = 1.0, method: str = "fused",
                 chunk_size: int = 1024, backend: str = "auto") -> None:
        check_range("temperature", temperature, low=0.0, low_open=True)
        check_choice("method", method, LOGPROB_METHODS)
        check_range("chunk_size", chunk_size, low=1)
        check_choice("backend", backend, BACKENDS)
        self.model = model.eval()
        self.names = [name for name, _ in model.named_parameters()]
        self.temperature, self.method, self.chunk_size, self.backend = temperature, method, chunk_size, backend
        if method == "fused":
            check_fusable(model)
            backbone(model)
            head_parameter_name(model)
        self._actors: dict[torch.dtype, nn.Module] = {}

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def vocab_size(self) -> int:
        """Rows of the LM head: the tokens the model can sample."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    def parameters(self) -> list[Tensor]:
        """Detached copies of the parameters, each ``[1, *shape]``."""
        return [p.detach().clone().unsqueeze(0) for p in self.model.parameters()]

    def named(self, params: Sequence[Tensor]) -> dict[str, Tensor]:
        """``[1, ...]`` population tensors → name → tensor (views, differentiable)."""
        if len(params) != len(self.names):
            raise ValueError(f"params must hold {len(self.names)} tensors (one per model parameter), got {len(params)}")
        return {name: p[0] for name, p in zip(self.names, params)}

    def actor(self, params: Sequence[Tensor]) -> nn.Module:
        """A module of the parameters' dtype holding ``params`` (population tensors ``[1, ...]``)."""
        dtype = params[0].dtype
        module = self.model if dtype == self.dtype else self._actors.get(dtype)
        if module is None:
            module = copy.deepcopy(self.model).to(dtype).eval()
            self._actors[dtype] = module
        with torch.no_grad():
            for p, src in zip(module.parameters(), params):
                p.copy_(src[0])
        return module

    def logp(self, params: Sequence[Tensor], prompt_ids: Tensor, prompt_mask: Tensor, actions: Tensor,
             mask: Tensor, method: str | None = None) -> Tensor:
        """Teacher-forced log-probs ``[B, T]`` under ``params`` (differentiable)."""
        return completion_logp(self.model, prompt_ids, prompt_mask, actions, mask, params=self.named(params),
                               temperature=self.temperature, method=method or self.method,
                               chunk_size=self.chunk_size, backend=self.backend)


# ----------------------------------------------------------------------------- task
@register_task("hf_text")
@dataclass
class HFTextTask(Task):
    """A transformers causal LM on a text environment of ``sandbox.envs.text`` (``env``:
    'arithmetic', 'reverse', 'parity'; its knobs in ``env_kwargs``).

    Each step draws ``prompts_per_step`` problems and samples ``samples_per_prompt`` completions of
    each (group id = prompt); R is the environment's score of the decoded completion. Evaluation:
    ``eval_prompts`` fresh problems, one sample each from the current learner without frictions:
    ``reward`` (mean), ``accuracy`` (completion = answer) and ``error`` = (R_max − reward)/(R_max − R_min).
    """

    one_model_per_run: ClassVar[bool] = True  # seeds run as separate configs (`sandbox run --seeds`)

    env: str = "arithmetic"
    env_kwargs: dict = field(default_factory=dict)
    path: str | None = None  # local checkpoint directory; None = tiny random config
    tokenizer: str = "char"  # 'char' (CharTokenizer over the env's characters) | 'checkpoint' (path's tokenizer)
    arch: str = "qwen2"  # tiny config: 'qwen2' | 'llama'
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    tie_embeddings: bool = False
    prompts_per_step: int = 16
    samples_per_prompt: int = 4  # G, the group size
    max_new_tokens: int = 0  # 0 = the env's longest answer + 1 (EOS)
    temperature: float = 1.0
    logprob: str = "fused"  # learner log-probs: 'fused' | 'naive'
    chunk_size: int = 1024  # fused kernel rows per chunk
    backend: str = "auto"  # fused kernel backend: 'auto' | 'torch' | 'triton'
    dtype: str = "float32"  # learner dtype: 'float32' | 'float64' | 'bfloat16'
    eval_prompts: int = 64
    population: int = 1  # one model per run
    frictions: FrictionStack = field(default_factory=FrictionStack)

    def __post_init__(self) -> None:
        from sandbox.envs.text import CharTokenizer, make_text_env

        if self.population != 1:
            raise ValueError(f"population must be 1 for {type(self).__name__} (one model per run; "
                             f"run seeds as separate configs), got {self.population}")
        for name in ("hidden", "layers", "heads", "prompts_per_step", "samples_per_prompt", "chunk_size",
                     "eval_prompts"):
            check_range(name, getattr(self, name), low=1)
        check_range("max_new_tokens", self.max_new_tokens, low=0)
        check_range("temperature", self.temperature, low=0.0, low_open=True)
        check_choice("tokenizer", self.tokenizer, ("char", "checkpoint"))
        check_choice("arch", self.arch, ARCHS)
        check_choice("logprob", self.logprob, LOGPROB_METHODS)
        check_choice("backend", self.backend, BACKENDS)
        check_choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")
        self.text_env = make_text_env(self.env, **self.env_kwargs)
        if self.path is not None:
            folder = Path(self.path)
            if not folder.is_dir() or not (folder / "config.json").is_file():
                raise ValueError(f"path must be a local checkpoint directory containing config.json, got {self.path!r}")
        if self.tokenizer == "checkpoint":
            if self.path is None:
                raise ValueError("tokenizer='checkpoint' needs path (a local checkpoint with a tokenizer)")
            self.tok = CheckpointTokenizer(self.path)
        else:
            self.tok = CharTokenizer(self.text_env.chars)
        self.n_actions = self.tok.vocab_size
        self.new_tokens = self.max_new_tokens or self.text_env.max_answer_chars + 1
        self.reward_range = tuple(self.text_env.reward_range)
        self.policy: CausalLMPolicy | None = None

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    # ------------------------------------------------------------------ model
    def build_model(self, generator: torch.Generator) -> nn.Module:
        if self.path is not None:
            model = load_causal_lm(self.path, self.dtype)
            vocab = model.get_input_embeddings().weight.shape[0]
            if self.n_actions > vocab:
                raise ValueError(f"the tokenizer has {self.n_actions} tokens but the checkpoint's vocabulary only {vocab}")
            return model
        return tiny_causal_lm(self.n_actions, self.hidden, self.layers, self.heads, arch=self.arch,
                              tie_embeddings=self.tie_embeddings, seed=generator).to(getattr(torch, self.dtype))

    def init_params(self, generator):
        model = self.build_model(generator)
        self.policy = CausalLMPolicy(model, temperature=self.temperature, method=self.logprob,
                                     chunk_size=self.chunk_size, backend=self.backend)
        return self.policy.parameters()

    def _require_policy(self) -> CausalLMPolicy:
        if self.policy is None:
            raise ValueError("call init_params first: it builds (or loads) the model")
        return self.policy

    # ------------------------------------------------------------------ problems
    def _encode_problems(self, problems, repeat: int) -> dict[str, Tensor]:
        from sandbox.envs.text import encode_batch

        prompts = [p.prompt for p in problems for _ in range(repeat)]
        answers = [p.answer for p in problems for _ in range(repeat)]
        wrong = [self.text_env.wrong_answer(p) for p in problems for _ in range(repeat)]
        prompt_ids, prompt_mask = encode_batch(self.tok, prompts, side="left")
        T = self.new_tokens
        target, _ = encode_batch(self.tok, answers, side="right", length=T, append_eos=True)
        wrong_ids, _ = encode_batch(self.tok, wrong, side="right", length=T, append_eos=True)
        return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "target": target, "wrong": wrong_ids,
                "answers": answers}

    def friction_context(self, batch: dict, seed: int) -> FrictionContext:
        vocab = self.policy.vocab_size if self.policy is not None else self.n_actions  # the model's, may be > the tokenizer's
        return FrictionContext(n_actions=vocab, reward_range=self.reward_range,
                               correct_actions=batch["target"].unsqueeze(0),
                               wrong_actions=batch["wrong"].unsqueeze(0), seed=seed)

    def score(self, actions: Tensor, answers: Sequence[str]) -> Tensor:
        """Rewards ``[B]`` of completions ``[B, T]``."""
        texts = [self.tok.decode(row, errors="replace") for row in actions]
        return self.text_env.scores(texts, answers)

    # ------------------------------------------------------------------ actor
    def collect(self, actor_params, step, version, generator, seed):
        policy = self._require_policy()
        n, G = self.prompts_per_step, self.samples_per_prompt
        batch = self._encode_problems(self.text_env.sample(n, generator), G)
        ctx = self.friction_context(batch, seed)
        frictions = self.frictions
        params = frictions.actor_params(list(actor_params), ctx) if frictions else list(actor_params)
        module = policy.actor(params)
        hooks = {}
        if frictions:
            hooks = {"logits_hook": lambda z: frictions.actor_logits(z.unsqueeze(0), ctx, generator)[0],
                     "probs_hook": lambda p: frictions.actor_probs(p.unsqueeze(0), ctx)[0]}
        prompt_ids, prompt_mask = batch["prompt_ids"], batch["prompt_mask"]
        comp = sample_completions(module, prompt_ids, prompt_mask, max_new_tokens=self.new_tokens,
                                  eos_id=self.tok.eos_id, pad_id=self.tok.pad_id, generator=generator,
                                  temperature=self.temperature, **hooks)
        extras: dict[str, Tensor] = {"prompt_mask": prompt_mask.unsqueeze(0),
                                     "target": batch["target"].unsqueeze(0),
                                     "target_mask": token_mask(batch["target"], self.tok.eos_id).unsqueeze(0)}
        with torch.no_grad():
            if params[0].dtype != policy.dtype:  # precision mismatch: the learner's precision on the same tokens
                learner = policy.logp(list(actor_params), prompt_ids, prompt_mask, comp.tokens, comp.mask)
                extras["sampler_k3_kl"] = k3_kl(comp.logp.unsqueeze(0), learner.float().unsqueeze(0),
                                                comp.mask.unsqueeze(0))
            sample = Sample(comp.tokens.unsqueeze(0), comp.logp.unsqueeze(0), comp.logp.unsqueeze(0))
            replaced: dict[str, Tensor] = {}
            if frictions:
                def policy_logp(actions: Tensor) -> Tensor:  # the actor's own log-probs, its hooks included
                    return self._actor_logp(module, prompt_ids, prompt_mask, actions[0], ctx, generator).unsqueeze(0)

                sample, replaced = frictions.override(sample, ctx, generator, policy_logp=policy_logp)
            mask = token_mask(sample.actions, self.tok.eos_id)
            rewards = self.score(sample.actions[0], batch["answers"]).unsqueeze(0)
            if frictions:
                rewards = frictions.reward(rewards, sample, ctx, generator, replaced)
        zero = torch.zeros((), dtype=sample.behavior_logp.dtype)
        return Rollout(
            obs=prompt_ids.unsqueeze(0),
            actions=sample.actions,
            mask=mask,
            behavior_logp=torch.where(mask, sample.behavior_logp, zero),
            true_behavior_logp=torch.where(mask, sample.true_logp, zero),
            rewards=rewards,
            group=torch.arange(n).repeat_interleave(G),
            version=torch.full(sample.actions.shape, int(version), dtype=torch.long),
            extras=extras,
        )

    def _actor_logp(self, module: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, actions: Tensor,
                    ctx: FrictionContext, generator: torch.Generator) -> Tensor:
        """Teacher-forced log-probs of ``actions`` [B, T] under the actor as it samples (its dtype,
        temperature and friction hooks), 0 after EOS."""
        P, T = prompt_ids.shape[1], actions.shape[1]
        ids = torch.cat([prompt_ids, actions], -1)
        attention = torch.cat([prompt_mask, torch.ones_like(actions, dtype=torch.bool)], -1).long()
        logits = module(input_ids=ids, attention_mask=attention, position_ids=_positions(attention),
                        use_cache=False).logits[:, P - 1 : P + T - 1]
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / self.temperature
        logits = self.frictions.actor_logits(logits.unsqueeze(0), ctx, generator)[0]
        probs = self.frictions.actor_probs(torch.softmax(logits, -1).unsqueeze(0), ctx)[0]
        logp = torch.log(probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1))
        return logp.masked_fill(~token_mask(actions, self.tok.eos_id), 0.0)

    # ------------------------------------------------------------------ learner
    def learner_terms(self, params, rollout: Rollout, advantage: Advantage, generator, recompute_proximal):
        policy = self._require_policy()
        prompt_ids, prompt_mask = rollout.obs[0], rollout.extras["prompt_mask"][0]
        logp = policy.logp(params, prompt_ids, prompt_mask, rollout.actions[0], rollout.mask[0]).unsqueeze(0)
        adv = compute_advantages(
            advantage, rollout.rewards, rollout.group, "hf_text",
            rho=lambda: torch.exp(sequence_log_ratio(logp.detach(), rollout.behavior_logp, rollout.mask)),
        )
        # the supervised target (xent): scored once per prompt, shared by its G samples
        G = self.samples_per_prompt
        target, target_mask = rollout.extras["target"][0], rollout.extras["target_mask"][0]
        target_logp = policy.logp(params, prompt_ids[::G], prompt_mask[::G], target[::G], target_mask[::G])
        return PGTerms(
            logp=logp,
            advantages=adv,
            mask=rollout.mask,
            behavior_logp=rollout.behavior_logp,
            proximal_logp=logp.detach() if recompute_proximal else None,
            group=rollout.group,
            target_logp=target_logp.repeat_interleave(G, 0).unsqueeze(0),
            generator=generator,
        )

    def objective(self, estimator: Estimator, terms: PGTerms, rollout: Rollout, params=None):
        if estimator.name == "xent":  # −log π(answer): aggregated over the answer's tokens
            return estimator(dataclasses.replace(terms, mask=rollout.extras["target_mask"]))
        return estimator(terms)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, params, generator):
        policy = self._require_policy()
        problems = self.text_env.sample(self.eval_prompts, generator)
        batch = self._encode_problems(problems, 1)
        comp = sample_completions(policy.actor([p.detach() for p in params]), batch["prompt_ids"],
                                  batch["prompt_mask"], max_new_tokens=self.new_tokens, eos_id=self.tok.eos_id,
                                  pad_id=self.tok.pad_id, generator=generator, temperature=self.temperature)
        rewards = self.score(comp.tokens, batch["answers"])
        exact = torch.tensor([self.tok.decode(row, errors="replace") == a for row, a in zip(comp.tokens, batch["answers"])])
        low, high = self.reward_range
        mean = rewards.mean()
        return {"reward": mean.reshape(1), "accuracy": exact.float().mean().reshape(1),
                "error": ((high - mean) / (high - low)).reshape(1)}

    def update_diagnostics(self, params, rollout, grad, estimator):
        out = {"rollout_reward": rollout.rewards.float().mean(-1),
               "response_length": rollout.mask.float().sum(-1).mean(-1)}
        if "sampler_k3_kl" in rollout.extras:
            out["sampler_k3_kl"] = rollout.extras["sampler_k3_kl"]
        return out


# ----------------------------------------------------------------------------- checkpoint tokenizer
class CheckpointTokenizer:
    """The tokenizer saved with a local checkpoint, behind the ``CharTokenizer`` interface
    (``encode``/``decode``/``pad_id``/``eos_id``/``vocab_size``); requires an EOS token."""

    def __init__(self, path: str | Path) -> None:
        from transformers import AutoTokenizer

        try:
            self.inner = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as err:
            raise ValueError(f"path {str(path)!r} holds no loadable tokenizer: {err}") from err
        if self.inner.eos_token_id is None:
            raise ValueError(f"the tokenizer at {str(path)!r} has no eos_token; tokenizer='checkpoint' needs one")
        self.eos_id = int(self.inner.eos_token_id)
        self.pad_id = int(self.inner.pad_token_id) if self.inner.pad_token_id is not None else self.eos_id
        self.vocab_size = len(self.inner)

    def encode(self, text: str) -> list[int]:
        return list(self.inner(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids, errors: str = "strict") -> str:
        """Text up to the first EOS without special tokens; an id outside the tokenizer (a padded
        model vocabulary) raises with ``errors='strict'`` and becomes U+FFFD with ``'replace'``."""
        from sandbox.envs.text import REPLACEMENT

        check_choice("errors", errors, ("strict", "replace"))
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        parts, run = [], []
        for i in ids:
            if 0 <= i < self.vocab_size:
                run.append(i)
                continue
            if errors == "strict":
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            parts += [self.inner.decode(run, skip_special_tokens=True), REPLACEMENT]
            run = []
        return "".join(parts) + self.inner.decode(run, skip_special_tokens=True)


__all__ = ["CausalLMPolicy", "CheckpointTokenizer", "Completions", "HFTextTask", "completion_logp",
           "head_parameter_name", "load_causal_lm", "sample_completions", "sample_rows", "tiny_causal_lm",
           "token_mask"]
