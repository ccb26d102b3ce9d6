"""The ``hf_text`` task: a ``transformers`` causal LM (``sandbox.policies.hf``) on a text environment
(``sandbox.envs.text``), trained by the generic loop.

The loop differentiates w.r.t. ``init_params`` — the model's parameters, each with a leading
population axis of size 1 ([1, *shape]); the learner reads them through
``torch.func.functional_call`` (so gradients reach those leaves), the actor copies the (possibly
stale) parameters into a cached module of the sampler's dtype. One model per run: ``population``
must be 1; seeds are separate runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from sandbox.core.sampling import SamplingChain
from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.envs.text import CharTokenizer, encode_batch, make_text_env
from sandbox.frictions.base import FrictionContext, FrictionStack
from sandbox.frictions.precision import k3_kl
from sandbox.kernels import BACKENDS
from sandbox.policies.decode import Versions, teacher_forced
from sandbox.policies.hf import (
    ARCHS,
    DTYPES,
    LOGPROB_METHODS,
    CausalLMPolicy,
    load_causal_lm,
    tiny_causal_lm,
)
from sandbox.policies.hf.logprob import forced_logits
from sandbox.policies.hf.pretrained import PRETRAINED, checkpoint_dir, require_pretrained
from sandbox.policies.hf.sampling import sample_completions, token_mask
from sandbox.policies.hf.tokenizer import CheckpointTokenizer
from sandbox.tasks.base import Batch, PolicySample, Scored, Task, register_task


@register_task("hf_text")
@dataclass
class HFTextTask(Task):
    """A transformers causal LM on a text environment of ``sandbox.envs.text`` (``env``:
    'arithmetic', 'reverse', 'parity'; its knobs in ``env_kwargs``).

    Each step draws ``prompts_per_step`` problems and samples ``samples_per_prompt`` completions of
    each (group id = prompt); R is the environment's score of the decoded completion. Evaluation:
    ``eval_prompts`` fresh problems, one sample each from the current learner without frictions:
    ``reward`` (mean), ``accuracy`` (completion = answer) and ``error`` = (R_max − reward)/(R_max − R_min).

    ``model='smollm2-135m'`` trains a pretrained model shipped in a package (``sandbox.policies.hf.pretrained``)
    with its own tokenizer; ``chat=True`` puts each problem's question in the user's turn of the
    model's chat template; ``train_layers=k`` trains only the last k decoder layers and the final norm.
    """

    default_lr = 3e-3
    one_model_per_run: ClassVar[bool] = True  # seeds run as separate configs (`sandbox run --seeds`)
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")

    env: str = "arithmetic"
    env_kwargs: dict = field(default_factory=dict)
    path: str | None = None  # local checkpoint directory; None = tiny random config
    model: str | None = None  # a pretrained model shipped in a package: 'smollm2-135m'
    # 'auto' (the model's own with `model`, else 'char') | 'char' (CharTokenizer over the env's
    # characters) | 'checkpoint' (path's tokenizer)
    tokenizer: str = "auto"
    chat: bool = False  # prompt = the problem's question in the user's turn of the tokenizer's chat template
    train_layers: int = 0  # 0 = every parameter; k ≥ 1 = the last k decoder layers and the final norm only
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
        check_int("population", self.population, low=1)
        if self.population != 1:
            raise ValueError(f"population must be 1 for {type(self).__name__} (one model per run; "
                             f"run seeds as separate configs), got {self.population}")
        for name in ("hidden", "layers", "heads", "prompts_per_step", "samples_per_prompt", "chunk_size",
                     "eval_prompts"):
            check_int(name, getattr(self, name), low=1)
        check_int("max_new_tokens", self.max_new_tokens, low=0)
        check_int("train_layers", self.train_layers, low=0)
        check_range("temperature", self.temperature, low=0.0, low_open=True)
        check_choice("tokenizer", self.tokenizer, ("auto", "char", "checkpoint"))
        if not isinstance(self.chat, bool):
            raise ValueError(f"chat must be a bool, got {self.chat!r}")
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
        self._tok = None
        if self.model is not None:
            check_choice("model", self.model, tuple(PRETRAINED))
            if self.path is not None or self.tokenizer == "char":
                raise ValueError(f"model={self.model!r} is a checkpoint with its own tokenizer: leave path unset "
                                 f"and tokenizer 'auto', got path={self.path!r}, tokenizer={self.tokenizer!r}")
            require_pretrained(self.model)  # its package is installed (converted on first use: self.tok)
        elif self.tokenizer == "checkpoint":
            if self.path is None:
                raise ValueError("tokenizer='checkpoint' needs path (a local checkpoint with a tokenizer)")
            self._tok = CheckpointTokenizer(self.path)
        else:
            self._tok = CharTokenizer(self.text_env.chars)
        if self.chat and self._tok is not None and not getattr(self._tok, "has_chat_template", False):
            raise ValueError("chat=True needs a tokenizer with a chat template (model=… or a checkpoint's tokenizer "
                             "that has one)")
        self.new_tokens = self.max_new_tokens or self.text_env.max_answer_chars + 1
        self.reward_range = tuple(self.text_env.reward_range)
        self.policy: CausalLMPolicy | None = None

    @property
    def tok(self):
        """The tokenizer (a pretrained model's is loaded, and converted once, on first use)."""
        if self._tok is None:
            self._tok = CheckpointTokenizer(checkpoint_dir(self.model))
        return self._tok

    @property
    def n_actions(self) -> int:
        return self.tok.vocab_size

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    # ------------------------------------------------------------------ model
    def build_model(self, generator: torch.Generator) -> nn.Module:
        if self.model is not None:
            return load_causal_lm(checkpoint_dir(self.model), self.dtype)
        if self.path is not None:
            model = load_causal_lm(self.path, self.dtype)
            vocab = model.get_input_embeddings().weight.shape[0]
            if self.n_actions > vocab:
                raise ValueError(f"the tokenizer has {self.n_actions} tokens but the checkpoint's vocabulary only {vocab}")
            return model
        return tiny_causal_lm(self.n_actions, self.hidden, self.layers, self.heads, arch=self.arch,
                              tie_embeddings=self.tie_embeddings, seed=generator).to(getattr(torch, self.dtype))

    def init_params(self, generator):
        model = self.build_model(generator).to(self.device)
        self.policy = CausalLMPolicy(model, temperature=self.temperature, method=self.logprob,
                                     chunk_size=self.chunk_size, backend=self.backend,
                                     trainable=last_layers(model, self.train_layers) if self.train_layers else None)
        return self.policy.parameters()

    def _require_policy(self) -> CausalLMPolicy:
        if self.policy is None:
            raise ValueError("call init_params first: it builds (or loads) the model")
        return self.policy

    # ------------------------------------------------------------------ environment
    def _encode_problems(self, problems, repeat: int) -> dict[str, Tensor]:
        prompts = [self.tok.chat(p.question) if self.chat else p.prompt for p in problems for _ in range(repeat)]
        answers = [p.answer for p in problems for _ in range(repeat)]
        wrong = [self.text_env.wrong_answer(p) for p in problems for _ in range(repeat)]
        prompt_ids, prompt_mask = encode_batch(self.tok, prompts, side="left")
        T = self.new_tokens
        target, _ = encode_batch(self.tok, answers, side="right", length=T, append_eos=True)
        wrong_ids, _ = encode_batch(self.tok, wrong, side="right", length=T, append_eos=True)
        move = lambda x: x.to(self.device)  # noqa: E731
        return {"prompt_ids": move(prompt_ids), "prompt_mask": move(prompt_mask), "target": move(target),
                "wrong": move(wrong_ids), "answers": answers}

    def draw_batch(self, generator):
        self._require_policy()
        n, G = self.prompts_per_step, self.samples_per_prompt
        rows = self._encode_problems(self.text_env.sample(n, generator), G)
        return Batch(obs=rows["prompt_ids"].unsqueeze(0), rows=rows,
                     group=torch.arange(n, device=self.device).repeat_interleave(G))

    def friction_context(self, batch, seed):
        vocab = self.policy.vocab_size if self.policy is not None else self.n_actions  # the model's, may be > the tokenizer's
        return FrictionContext(n_actions=vocab, reward_range=self.reward_range,
                               correct_actions=batch.rows["target"].unsqueeze(0),
                               wrong_actions=batch.rows["wrong"].unsqueeze(0), seed=seed)

    def score_text(self, actions: Tensor, answers: Sequence[str]) -> Tensor:
        """Rewards ``[B]`` of completions ``[B, T]`` (the verifier reads text: on the host)."""
        texts = [self.tok.decode(row, errors="replace") for row in actions.cpu()]
        return self.text_env.scores(texts, answers).to(actions.device)

    def reward(self, batch, actions, generator):
        return self.score_text(actions[0], batch.rows["answers"]).unsqueeze(0)

    def token_mask(self, batch, actions):
        return token_mask(actions, self.tok.eos_id)

    # ------------------------------------------------------------------ policy
    def sample(self, params, batch, chain, generator, versions=None):
        module = self._require_policy().actor(params)
        prompt_ids, prompt_mask = batch.rows["prompt_ids"], batch.rows["prompt_mask"]
        comp = sample_completions(module, prompt_ids, prompt_mask, max_new_tokens=self.new_tokens,
                                  eos_id=self.tok.eos_id, pad_id=self.tok.pad_id, generator=generator, chain=chain)
        # the actor's own log-probs of any tokens [1, B, T] (its dtype and chain), every row recomputed, 0 after EOS
        forced = lambda m, a: chain.distribution(forced_logits(m, prompt_ids, prompt_mask, a[0]).unsqueeze(0))[0]  # noqa: E731
        logp_of = teacher_forced(forced, Versions.single(module, self.new_tokens),
                                 mask_of=lambda a: token_mask(a, self.tok.eos_id))
        return PolicySample(comp.tokens.unsqueeze(0), comp.logp.unsqueeze(0), logp_of)

    def rollout_extras(self, batch, ctx, actor_params, params, sample):
        rows = batch.rows
        extras = {"prompt_mask": rows["prompt_mask"].unsqueeze(0), "target": rows["target"].unsqueeze(0),
                  "target_mask": token_mask(rows["target"], self.tok.eos_id).unsqueeze(0)}
        if params[0].dtype != self.policy.dtype:  # precision mismatch: the learner's precision on the same tokens
            tokens = sample.actions[0]
            mask = token_mask(tokens, self.tok.eos_id)
            with torch.no_grad():
                learner = self.policy.logp(list(actor_params), rows["prompt_ids"], rows["prompt_mask"], tokens, mask)
            extras["sampler_k3_kl"] = k3_kl(sample.logp, learner.float().unsqueeze(0), mask.unsqueeze(0))
        return extras

    # ------------------------------------------------------------------ learner
    def score(self, params, rollout, grad=True):
        policy = self._require_policy()
        prompt_ids, prompt_mask = rollout.obs[0], rollout.extras["prompt_mask"][0]
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            logp = policy.logp(params, prompt_ids, prompt_mask, rollout.actions[0], rollout.mask[0]).unsqueeze(0)
            # the supervised target (xent): scored once per prompt, shared by its G samples
            G = self.samples_per_prompt
            target, target_mask = rollout.extras["target"][0], rollout.extras["target_mask"][0]
            target_logp = policy.logp(params, prompt_ids[::G], prompt_mask[::G], target[::G], target_mask[::G])
        return Scored(logp=logp, target_logp=target_logp.repeat_interleave(G, 0).unsqueeze(0))

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, params, generator):
        policy = self._require_policy()
        problems = self.text_env.sample(self.eval_prompts, generator)
        batch = self._encode_problems(problems, 1)
        comp = sample_completions(policy.actor([p.detach() for p in params]), batch["prompt_ids"],
                                  batch["prompt_mask"], max_new_tokens=self.new_tokens, eos_id=self.tok.eos_id,
                                  pad_id=self.tok.pad_id, generator=generator,
                                  chain=SamplingChain(temperature=self.temperature))
        rewards = self.score_text(comp.tokens, batch["answers"])
        exact = torch.tensor([self.tok.decode(row, errors="replace") == a for row, a in zip(comp.tokens.cpu(), batch["answers"])],
                             device=self.device)
        low, high = self.reward_range
        mean = rewards.mean()
        return {"reward": mean.reshape(1), "accuracy": exact.float().mean().reshape(1),
                "error": ((high - mean) / (high - low)).reshape(1)}

    def update_diagnostics(self, params, rollout, grad, estimator, terms_of=None):
        out = {"rollout_reward": rollout.rewards.float().mean(-1),
               "response_length": rollout.mask.float().sum(-1).mean(-1)}
        if "sampler_k3_kl" in rollout.extras:
            out["sampler_k3_kl"] = rollout.extras["sampler_k3_kl"]
        return out


def last_layers(model: nn.Module, k: int) -> list[str]:
    """Names of the parameters of the last ``k`` decoder layers and the final norm (Llama/Qwen2
    layout: ``model.layers.{i}.…``, ``model.norm.…``)."""
    layers = int(model.config.num_hidden_layers)
    check_int("train_layers", k, low=1, high=layers)
    prefixes = tuple(f"model.layers.{i}." for i in range(layers - k, layers)) + ("model.norm.",)
    names = [name for name, _ in model.named_parameters() if name.startswith(prefixes)]
    if not names:
        raise ValueError(f"train_layers: {type(model).__name__} has no parameters named model.layers.* / model.norm.*")
    return names


@register_task("text_reverse")
@dataclass
class TextReverseTask(HFTextTask):
    """``hf_text`` on the ``reverse`` environment (its knobs in ``env_kwargs``)."""

    env: str = field(default="reverse", init=False)


@register_task("text_parity")
@dataclass
class TextParityTask(HFTextTask):
    """``hf_text`` on the ``parity`` environment."""

    env: str = field(default="parity", init=False)


@register_task("text_arithmetic")
@dataclass
class TextArithmeticTask(HFTextTask):
    """``hf_text`` on the ``arithmetic`` environment."""

    env: str = field(default="arithmetic", init=False)


__all__ = ["HFTextTask", "TextArithmeticTask", "TextParityTask", "TextReverseTask"]
