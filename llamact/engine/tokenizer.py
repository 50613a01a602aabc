"""A model's tokenizer alone: its vocabulary loaded without weights or a context.

    with Tokenizer.load("model.gguf") as tokenizer:
        ids = tokenizer.tokenize("Hello", add_special=True, parse_special=True)
        tokenizer.detokenize(ids), tokenizer.token_piece(ids[0]), tokenizer.n_vocab

What enters: a GGUF path (only its metadata and vocabulary are read: fast, little memory). What
leaves: token ids, text and token pieces exactly as ``LlamaEngine`` gives them for the same model.
Raises ``LlamaModelException`` for a file that is not a loadable GGUF, ``LlamaStateException`` once
closed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..native.model import Model, ModelLoadOptions

__all__ = ["Tokenizer"]


class Tokenizer:
    """See the module docstring. Close it (or use ``with``) to free the vocabulary."""

    def __init__(self, model: Model) -> None:
        self._model = model

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokenizer:
        return cls(Model(path, ModelLoadOptions(vocab_only=True)))

    @property
    def path(self) -> Path:
        return self._model.path

    @property
    def n_vocab(self) -> int:
        return self._model.vocab.n_tokens

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = True,
                 limit: int | None = None) -> list[int]:
        return self._model.vocab.tokenize(text, add_special, parse_special, limit=limit)

    def detokenize(self, tokens: Sequence[int], render_special: bool = True) -> str:
        return self._model.vocab.detokenize(tokens, remove_special=False, unparse_special=render_special)

    def token_piece(self, token: int, special: bool = True) -> bytes:
        return self._model.vocab.token_to_piece(token, special=special)

    def close(self) -> None:
        self._model.close()

    def __enter__(self) -> Tokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
