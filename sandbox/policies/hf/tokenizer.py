"""The tokenizer saved with a local checkpoint, behind the ``CharTokenizer`` interface."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from sandbox.core.tokens import REPLACEMENT
from sandbox.core.validation import check_choice


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

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.inner, "chat_template", None))

    def chat(self, question: str) -> str:
        """``question`` as the user's turn of the model's own chat template, up to where the
        assistant's reply begins (the template's default system turn included)."""
        if not self.has_chat_template:
            raise ValueError("chat=True needs a tokenizer with a chat template; this checkpoint's has none")
        return self.inner.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                              tokenize=False)

    def encode(self, text: str) -> list[int]:
        return list(self.inner(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids, errors: str = "strict") -> str:
        """Text up to the first EOS without special tokens; an id outside the tokenizer (a padded
        model vocabulary) raises with ``errors='strict'`` and becomes U+FFFD with ``'replace'``."""
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


__all__ = ["CheckpointTokenizer"]
