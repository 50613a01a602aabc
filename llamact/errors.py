"""The exception hierarchy: every failure a user can cause surfaces as a ``LlamaException``.

Each exception carries a human-readable ``message`` that says what to do, and ``details``: a
dict of the facts behind it (paths, sizes, parameter names) for programs that want to react.
"""

from __future__ import annotations

from typing import Any


class LlamaException(Exception):
    """Base of every llamact error."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return self.message


class LlamaModelException(LlamaException):
    """A model file is missing, unreadable, not GGUF, truncated or unsupported."""


class LlamaContextException(LlamaException):
    """A context could not be created (size, memory, parameters)."""


class LlamaInferenceException(LlamaException):
    """Tokenization, decoding or sampling failed, or a sampling parameter is invalid."""


class LlamaUnsupportedException(LlamaException):
    """The request uses something this build or this model does not support."""


class LlamaStateException(LlamaException):
    """An object was used in a state that does not allow it (closed, freed, busy) or a saved state is bad."""


__all__ = [
    "LlamaException",
    "LlamaModelException",
    "LlamaContextException",
    "LlamaInferenceException",
    "LlamaUnsupportedException",
    "LlamaStateException",
]
