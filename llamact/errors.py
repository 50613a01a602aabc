"""The exception hierarchy: every failure a user can cause surfaces as a ``LlamaException``.

Each exception carries a human-readable ``message`` that says what to do, and ``details``: a
dict of the facts behind it (paths, sizes, parameter names) for programs that want to react.

    LlamaException
    ├── LlamaModelException        a model file (or adapter) is missing, unreadable or unsupported
    ├── LlamaContextException      a context cannot be made, or a prompt does not fit it
    ├── LlamaInferenceException    tokenizing, decoding, sampling or parsing the output failed
    ├── LlamaUnsupportedException  something this build, model or template cannot do
    ├── LlamaStateException        an object used in a state that does not allow it (closed, busy)
    ├── LlamaRequestException      a request is malformed: a message, tool, option or body field
    └── LlamaTemplateException     a chat template does not compile or fails to render

    Two failures are both an inference failure and the caller's request (they derive from both):
    LlamaSamplerParameterException (a sampling parameter out of its range) and
    LlamaGrammarDeadEndException (the request's grammar admits no token of this model at some point).

The server answers a ``LlamaRequestException`` (those two included) or ``LlamaUnsupportedException`` with HTTP 400
(``invalid_request_error``), a ``LlamaContextException`` with 400 (``exceed_context_size_error``), and
anything else with 500 (``server_error``), as llama-server does (``server.protocol.error_kind``).
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
    """A context could not be created (size, memory, parameters), or a prompt does not fit it."""


class LlamaInferenceException(LlamaException):
    """Tokenization, decoding, sampling or output parsing failed, or a sampling parameter is invalid."""


class LlamaUnsupportedException(LlamaException):
    """The request uses something this build, this model or its template does not support."""


class LlamaStateException(LlamaException):
    """An object was used in a state that does not allow it (closed, freed, busy) or a saved state is bad."""


class LlamaRequestException(LlamaException):
    """A request is malformed or contradicts itself (a message, tool, option or HTTP body field); the
    message names the field, with upstream's text where llama-server has one."""


class LlamaTemplateException(LlamaException):
    """A chat template failed to compile or to render (``llamact.jinja``'s errors; ``source_name``
    and ``line`` in ``details`` say where)."""


class LlamaSamplerParameterException(LlamaInferenceException, LlamaRequestException):
    """A sampling parameter out of the range llama.cpp takes (``details`` names the sampler and value)."""


class LlamaGrammarDeadEndException(LlamaInferenceException, LlamaRequestException):
    """The grammar admits no token of the model's vocabulary at this point of the output: the
    constraint cannot be met (e.g. a schema whose minimum is above its maximum)."""


class LlamaTokenLimitException(LlamaInferenceException, LlamaRequestException):
    """A text holds more tokens than the caller's limit; ``details["at_least"]`` is a count it surely
    reaches (a huge text is counted on a prefix, see ``llamact.native.token_limit``) and
    ``details["exact"]`` whether that count is the whole text's."""


class LlamaMediaException(LlamaInferenceException, LlamaRequestException):
    """An image or audio medium of a request cannot be used: bytes that are no image or audio file
    mtmd reads, a format or source that is not allowed, a medium past the pixel or duration limit."""


__all__ = [
    "LlamaException",
    "LlamaModelException",
    "LlamaContextException",
    "LlamaInferenceException",
    "LlamaUnsupportedException",
    "LlamaStateException",
    "LlamaRequestException",
    "LlamaTemplateException",
    "LlamaSamplerParameterException",
    "LlamaGrammarDeadEndException",
    "LlamaTokenLimitException",
    "LlamaMediaException",
]
