"""Hugging Face causal LMs as policies: a local checkpoint (``load_causal_lm``; nothing is ever
downloaded) or a tiny random Qwen2- or Llama-style config built in code (``tiny_causal_lm``),
initialised from an explicit seed; and the pieces the fused log-prob path needs (``backbone``,
``head_parameter_name``, ``check_fusable``)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from sandbox.core.validation import check_choice, check_range

ARCHS = ("qwen2", "llama")
DTYPES = ("float32", "float64", "bfloat16")


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


def lm_sizes(config: dict) -> tuple[int, int, int]:
    """A Llama- or Qwen2-style causal LM's sizes from its config (``config.json``'s fields), without
    building it: (parameters, weights of one decoder layer's matrices, weights of the LM head's).
    A layer holds q, k, v, o (head_dim·heads or ·kv_heads wide), the gated MLP (3·hidden·intermediate),
    two norms and the biases its type adds (Qwen2: q, k, v; Llama: ``attention_bias``,
    ``mlp_bias``); the model adds the embedding, a final norm and, untied, the head."""
    try:
        h, vocab, layers = int(config["hidden_size"]), int(config["vocab_size"]), int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv = int(config.get("num_key_value_heads") or heads)
        mlp = int(config.get("intermediate_size") or 4 * h)
        head_dim = int(config.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"config must give a causal LM's sizes (hidden_size, vocab_size, num_hidden_layers, "
                         f"num_attention_heads), got {type(err).__name__}: {err}") from None
    q, k = heads * head_dim, kv * head_dim
    matrices = h * q + 2 * h * k + q * h + 3 * h * mlp
    bias = 0
    if config.get("model_type") == "qwen2":
        bias = q + 2 * k
    elif config.get("attention_bias"):
        bias = q + 2 * k + h
    if config.get("mlp_bias"):
        bias += 2 * mlp + h
    tied = bool(config.get("tie_word_embeddings", False))
    params = vocab * h * (1 if tied else 2) + layers * (matrices + bias + 2 * h) + h
    return params, matrices, vocab * h


def tiny_config(vocab_size: int, hidden: int, layers: int, heads: int, arch: str, tie_embeddings: bool) -> dict:
    """The config fields of ``tiny_causal_lm``'s model (``lm_sizes`` reads them)."""
    return {"model_type": arch, "hidden_size": hidden, "vocab_size": vocab_size, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": 2 * hidden,
            "tie_word_embeddings": bool(tie_embeddings)}


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


__all__ = ["ARCHS", "DTYPES", "backbone", "check_fusable", "head_parameter_name", "lm_sizes", "load_causal_lm",
           "tiny_causal_lm", "tiny_config"]
