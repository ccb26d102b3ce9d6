"""Teacher-forced log-probs of completions under a causal LM, and ``CausalLMPolicy``, which holds a
model's parameters outside it (population tensors ``[1, ...]``) for the learner and the actor.

log π(a_t | prompt, a_<t) = log_softmax(h_t Wᵀ/τ)[a_t] with h_t the backbone's last hidden state
before a_t and W the output embedding (tied or not), computed by ``sandbox.kernels.fused_logprob``
without the [N, V] logits (``method='fused'``) or from the model's full logits (``'naive'``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from sandbox.core.validation import check_choice, check_range, check_tensor
from sandbox.kernels import BACKENDS, fused_logprob
from sandbox.policies.hf.model import backbone, check_fusable, head_parameter_name
from sandbox.policies.hf.sampling import check_prompts, positions

LOGPROB_METHODS = ("fused", "naive")


def _call(module: nn.Module, params: dict[str, Tensor] | None, **kwargs):
    if params is None:
        return module(**kwargs)
    return torch.func.functional_call(module, params, args=(), kwargs=kwargs)


def _forward_kwargs(prompt_ids: Tensor, prompt_mask: Tensor, actions: Tensor) -> dict:
    """One forward over [prompt ; actions]: every prompt token ``prompt_mask`` keeps and every action."""
    attention = torch.cat([prompt_mask, torch.ones_like(actions, dtype=torch.bool)], -1).long()
    return dict(input_ids=torch.cat([prompt_ids, actions], -1), attention_mask=attention,
                position_ids=positions(attention), use_cache=False)


def forced_logits(model: nn.Module, prompt_ids: Int[Tensor, "B P"], prompt_mask: Bool[Tensor, "B P"],
                  actions: Int[Tensor, "B T"], params: dict[str, Tensor] | None = None) -> Float[Tensor, "B T V"]:
    """Teacher-forced next-token logits of ``actions`` after left-padded prompts, in fp32 (fp64 for
    an fp64 model): position t's logits see the prompt and a_<t (``params`` as in ``completion_logp``)."""
    P, T = prompt_ids.shape[1], actions.shape[1]
    logits = _call(model, params, **_forward_kwargs(prompt_ids, prompt_mask, actions)).logits[:, P - 1 : P + T - 1]
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


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
    check_prompts(prompt_ids, prompt_mask)
    check_tensor("actions", actions, dtype="int", ndim=2)
    check_tensor("mask", mask, dtype="bool", ndim=2)
    if actions.shape[0] != prompt_ids.shape[0] or mask.shape != actions.shape:
        raise ValueError(f"actions and mask must have shape [B, T] with B={prompt_ids.shape[0]}, "
                         f"got {tuple(actions.shape)} and {tuple(mask.shape)}")
    if method == "naive":
        log_probs = torch.log_softmax(forced_logits(model, prompt_ids, prompt_mask, actions, params) / temperature, -1)
        return log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, 0.0)
    P, T = prompt_ids.shape[1], actions.shape[1]
    kwargs = _forward_kwargs(prompt_ids, prompt_mask, actions)
    check_fusable(model)
    body, prefix = backbone(model)
    head_name = head_parameter_name(model)
    if params is None:
        body_params, weight = None, dict(model.named_parameters())[head_name]
    else:
        cut = len(prefix) + 1
        body_params = {k[cut:]: v for k, v in params.items() if k.startswith(prefix + ".")}
        weight = params[head_name] if head_name in params else dict(model.named_parameters())[head_name]
    hidden = _call(body, body_params, **kwargs).last_hidden_state[:, P - 1 : P + T - 1]
    rows = hidden[mask]
    if temperature != 1.0:
        rows = rows / temperature
    values = fused_logprob(rows, weight, actions[mask], chunk_size=chunk_size, backend=backend, ignore_index=None)
    return torch.zeros(mask.shape, dtype=values.dtype, device=values.device).masked_scatter(mask, values)


class CausalLMPolicy:
    """A causal LM with parameters held outside it: ``parameters()`` gives copies with a population
    axis of 1, ``logp(params, ...)`` scores completions with them (differentiably) and
    ``actor(params)`` loads them into a cached module of their dtype for sampling.

    ``trainable`` (parameter names; default all) are the ones held outside: the others stay in the
    model, frozen (``requires_grad=False``), and every call reads them from there."""

    def __init__(self, model: nn.Module, *, temperature: float = 1.0, method: str = "fused",
                 chunk_size: int = 1024, backend: str = "auto", trainable: Sequence[str] | None = None) -> None:
        check_range("temperature", temperature, low=0.0, low_open=True)
        check_choice("method", method, LOGPROB_METHODS)
        check_range("chunk_size", chunk_size, low=1)
        check_choice("backend", backend, BACKENDS)
        self.model = model.eval()
        every = [name for name, _ in model.named_parameters()]
        if trainable is None:
            self.names = every
        else:
            unknown = sorted(set(trainable) - set(every))
            if unknown or not trainable:
                raise ValueError(f"trainable must name parameters of the model, got unknown {unknown[:3]}"
                                 if unknown else "trainable must name at least one parameter")
            self.names = [name for name in every if name in set(trainable)]
            for name, p in model.named_parameters():
                p.requires_grad_(name in set(trainable))
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
        """Detached copies of the (trainable) parameters, each ``[1, *shape]``."""
        own = dict(self.model.named_parameters())
        return [own[name].detach().clone().unsqueeze(0) for name in self.names]

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
            own = dict(module.named_parameters())
            for name, src in zip(self.names, params):
                own[name].copy_(src[0])
        return module

    def logp(self, params: Sequence[Tensor], prompt_ids: Tensor, prompt_mask: Tensor, actions: Tensor,
             mask: Tensor, method: str | None = None) -> Tensor:
        """Teacher-forced log-probs ``[B, T]`` under ``params`` (differentiable)."""
        return completion_logp(self.model, prompt_ids, prompt_mask, actions, mask, params=self.named(params),
                               temperature=self.temperature, method=method or self.method,
                               chunk_size=self.chunk_size, backend=self.backend)


__all__ = ["LOGPROB_METHODS", "CausalLMPolicy", "completion_logp", "forced_logits"]
