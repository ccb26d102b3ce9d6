"""The ``hf_text`` task: the generic ``Task`` of a text environment (``sandbox.envs.text_environment``)
× a ``transformers`` causal LM (``sandbox.policies.hf.policy``; or any family that reads text
prompts, ``policy``/``policy_kwargs``: ``sandbox.tasks.compose``) × the plain objective.

The loop differentiates w.r.t. ``init_params`` — the model's parameters, each with a leading
population axis of size 1 ([1, *shape]); the learner reads them through
``torch.func.functional_call`` (so gradients reach those leaves), the actor copies the (possibly
stale) parameters into a cached module of the sampler's dtype. One model per run: ``population``
must be 1; seeds are separate runs. ``temperature`` is the policy's τ (``sandbox.policies.base``):
the learner scores, evaluation and the actor sample softmax(z/τ).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from sandbox.core.validation import check_choice, check_int, check_range
from sandbox.envs.text import CharTokenizer, make_text_env
from sandbox.envs.text_environment import TextEnvironment
from sandbox.frictions.base import FrictionStack
from sandbox.kernels import BACKENDS
from sandbox.policies.hf import ARCHS, DTYPES, LOGPROB_METHODS, load_causal_lm, tiny_causal_lm
from sandbox.policies.hf.model import lm_sizes, tiny_config
from sandbox.policies.hf.policy import HFPolicy, last_layers
from sandbox.policies.hf.pretrained import (
    PRETRAINED,
    checkpoint_dir,
    models_dir,
    require_pretrained,
)
from sandbox.policies.hf.tokenizer import CheckpointTokenizer
from sandbox.tasks.base import Task, register_task
from sandbox.tasks.compose import choose_objective, choose_policy


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
    policy: str = "causal_lm"  # a registered family that reads text prompts ('causal_lm' of the knobs above)
    policy_kwargs: dict = field(default_factory=dict)  # its knobs, for a family other than 'causal_lm'
    objective: str = "plain"  # the one objective text prompts take
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
        tokenizer = functools.partial(getattr, self, "tok")  # a pretrained one is loaded on first use
        self.environment = TextEnvironment(self.text_env, tokenizer, self.new_tokens, self.prompts_per_step,
                                           self.samples_per_prompt, self.eval_prompts, self.chat)
        spec = self.environment.spec
        self.policy = choose_policy(self, self.policy, spec, "causal_lm", lambda: HFPolicy(
            self.build_model, tokenizer, self.new_tokens, self.temperature, self.logprob, self.chunk_size,
            self.backend, self.train_layers))
        self.objective = choose_objective(self, self.objective, spec, self.policy)
        self.diagnostics = rollout_diagnostics

    @property
    def tok(self):
        """The tokenizer (a pretrained model's is loaded, and converted once, on first use)."""
        if self._tok is None:
            self._tok = CheckpointTokenizer(checkpoint_dir(self.model))
        return self._tok

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    def sizes(self) -> tuple[int, int, int, int, int] | None:
        """The causal LM's parameters and trained parameters, and the matrix weights a token's
        forward pass multiplies, its backward pass multiplies (activation gradients) and gets a
        gradient for — from its config alone (``lm_sizes``): the tiny config's, or a checkpoint's
        ``config.json`` (a pretrained model's once converted); None where it cannot say (another
        policy family, a pretrained model not converted yet). With ``train_layers`` k the backward
        pass runs through the head and the last k layers, and only those layers' weights train."""
        if not isinstance(self.policy, HFPolicy):
            return None
        if self.model is not None or self.path is not None:
            file = (models_dir() / self.model if self.model is not None else Path(self.path)) / "config.json"
            try:
                config = json.loads(file.read_text())
                params, layer, head = lm_sizes(config)
            except (OSError, ValueError):
                return None
        else:
            config = tiny_config(self.tok.vocab_size, self.hidden, self.layers, self.heads, self.arch,
                                 self.tie_embeddings)
            params, layer, head = lm_sizes(config)
        n, hidden = int(config["num_hidden_layers"]), int(config["hidden_size"])
        forward = n * layer + head
        if not self.train_layers:
            return params, params, forward, forward, forward
        k = min(self.train_layers, n)
        per_layer = (params - head * (1 if config.get("tie_word_embeddings") else 2) - hidden) // n
        return params, k * per_layer + hidden, forward, k * layer + head, k * layer

    def memory(self) -> tuple[int, int]:
        """The trained parameters in the learner's dtype (a lower bound: the frozen rest of the
        model and a step's activations are left out); (0, 0) where ``sizes`` cannot say."""
        sizes = self.sizes()
        return (sizes[1] * getattr(torch, self.dtype).itemsize, 0) if sizes else (0, 0)

    def work(self) -> float:
        """A lower bound of a step's FLOPs: per token 2 per weight of the forward pass, 2 per weight
        the backward pass multiplies and 2 per trained one (6 per weight when all train, the
        transformer rule) — over the batch's rows, each at least one prompt token (the actor's
        prefill: a forward pass) and one completion token (it may be EOS alone; the learner's pass
        teacher-forces both). Attention scores and evaluation left out; 0 where ``sizes`` cannot say."""
        sizes = self.sizes()
        if sizes is None:
            return 0.0
        _, _, forward, backward, trained = sizes
        return float(self.batch_size * (2 * forward + 2 * (2 * forward + 2 * backward + 2 * trained)))

    # ------------------------------------------------------------------ model
    def build_model(self, generator: torch.Generator) -> nn.Module:
        if self.model is not None:
            return load_causal_lm(checkpoint_dir(self.model), self.dtype)
        if self.path is not None:
            model = load_causal_lm(self.path, self.dtype)
            vocab = model.get_input_embeddings().weight.shape[0]
            if self.tok.vocab_size > vocab:
                raise ValueError(f"the tokenizer has {self.tok.vocab_size} tokens but the checkpoint's vocabulary only {vocab}")
            return model
        return tiny_causal_lm(self.tok.vocab_size, self.hidden, self.layers, self.heads, arch=self.arch,
                              tie_embeddings=self.tie_embeddings, seed=generator).to(getattr(torch, self.dtype))


def rollout_diagnostics(task, params, rollout, grad, terms_of=None) -> dict[str, Tensor]:
    """The rollout's mean reward and response length, and the sampler's k3 KL where its numerics differ."""
    out = {"rollout_reward": rollout.rewards.float().mean(-1),
           "response_length": rollout.mask.float().sum(-1).mean(-1)}
    if "sampler_k3_kl" in rollout.extras:
        out["sampler_k3_kl"] = rollout.extras["sampler_k3_kl"]
    return out


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


__all__ = ["HFTextTask", "last_layers", "TextArithmeticTask", "TextParityTask", "TextReverseTask"]
