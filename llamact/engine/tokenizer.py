"""A model's tokenizer alone: its vocabulary loaded without weights or a context.

    with Tokenizer.load("model.gguf") as tokenizer:
        ids = tokenizer.tokenize("Hello", add_special=True, parse_special=True)
        tokenizer.detokenize(ids), tokenizer.token_piece(ids[0]), tokenizer.n_vocab
        tokenizer.chat_template(messages, tools=...).prompt     # the model's chat template, as the engine renders it

What enters: a GGUF path (only its metadata and vocabulary are read: fast, little memory) and, as
``ModelParams.chat_template``, a template to use instead of the model's. What leaves: token ids,
text, token pieces and rendered chat prompts exactly as ``LlamaEngine`` gives them for the same model
(a prompt router renders and tokenizes without loading weights: ``llamact.serve_ray``).
Raises ``LlamaModelException`` for a file that is not a loadable GGUF, ``LlamaStateException`` once
closed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..chat.pipeline import apply_request
from ..chat.request import chat_template_request
from ..chat.result import ChatTemplateResult
from ..native.model import Model, ModelLoadOptions
from .templating import EngineTemplates

__all__ = ["Tokenizer"]


class Tokenizer:
    """See the module docstring. Close it (or use ``with``) to free the vocabulary."""

    def __init__(self, model: Model, chat_template: str | None = None) -> None:
        self._model = model
        self._templates = EngineTemplates(model, chat_template)

    @classmethod
    def load(cls, path: str | os.PathLike[str], chat_template: str | None = None) -> Tokenizer:
        return cls(Model(path, ModelLoadOptions(vocab_only=True)), chat_template)

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

    def chat_template(self, messages: Any, **options: Any) -> ChatTemplateResult:
        """``LlamaEngine.chat_template`` without the weights: the same request, the same result."""
        self._model.check_open()
        request = chat_template_request(messages, options)
        return apply_request(self._templates.templates(request.custom_template), request)

    def close(self) -> None:
        self._model.close()

    def __enter__(self) -> Tokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
