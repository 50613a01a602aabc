"""The exception hierarchy: every failure a user can cause surfaces as a ``LlamaException``.

Each exception carries a human-readable ``message`` that says what to do, and ``details``: a
dict of the facts behind it (paths, sizes, parameter names) for programs that want to react.
Each class declares its ``kind`` (an ``ErrorKind``): what kind of failure it is, decided where it is
raised, so that nothing downstream sorts errors by their text (the server answers by kind, one table).
A class of kind K derives from K's class below (``KIND_CLASSES``), so catching that class catches
every failure of its kind.

    LlamaException
    ├── LlamaModelException        a model file (or adapter) is missing, unreadable or unsupported
    ├── LlamaContextException      a context cannot be made, or a prompt does not fit it
    ├── LlamaInferenceException    tokenizing, decoding, sampling or parsing the output failed
    ├── LlamaUnsupportedException  something this build, model or template cannot do
    ├── LlamaStateException        an object used in a state that does not allow it (closed, busy)
    ├── LlamaRequestException      a request is malformed: a message, tool, option or body field
    └── LlamaTemplateException     a chat template does not compile or fails to render

    Some failures of the caller's request are raised where inference runs, and were
    ``LlamaInferenceException``s before they had a kind; they derive from both, kind request:
    LlamaArgumentException (a bad argument of an inference call: a prompt, token ids, text, a
    generation option), LlamaSamplerParameterException (a sampling parameter llama.cpp does not take),
    LlamaGrammarDeadEndException, LlamaTokenLimitException and LlamaMediaException.

The server answers by kind (``server.http.errors.ANSWERS``), as llama-server does: request and
unsupported 400 ``invalid_request_error``, context 400 ``exceed_context_size_error``, the others 500
``server_error``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, ClassVar


class ErrorKind(str, Enum):
    """What kind of failure an exception is: whose mistake, and what a caller can do about it."""

    REQUEST = "request"            # the caller's input is wrong (an argument, a message, a body field): fix it
    UNSUPPORTED = "unsupported"    # valid, but this build, model, template or runtime cannot do it
    TEMPLATE = "template"          # a chat template does not compile or fails to render
    CONTEXT = "context"            # a context cannot be made, or the prompt does not fit it
    MODEL = "model"                # a model file (or adapter) is missing, unreadable or unsupported
    INFERENCE = "inference"        # tokenizing, decoding, sampling or parsing the output failed
    STATE = "state"                # an object used in a state that does not allow it, or a bad saved state
    UNCLASSIFIED = "unclassified"  # raised as the base ``LlamaException`` itself


class LlamaException(Exception):
    """Base of every llamact error."""

    kind: ClassVar[ErrorKind] = ErrorKind.UNCLASSIFIED

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class with bases of different kinds says which kind it is (the first base's is not a guess
        to make silently)."""
        super().__init_subclass__(**kwargs)
        inherited = {base.kind for base in cls.__bases__ if issubclass(base, LlamaException)}
        if len(inherited) > 1 and "kind" not in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} derives from exceptions of kinds "
                            f"{sorted(k.value for k in inherited)}: declare its kind")
        if not isinstance(cls.kind, ErrorKind):
            raise TypeError(f"{cls.__qualname__}.kind must be an ErrorKind, got {cls.kind!r}")

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return self.message


class LlamaModelException(LlamaException):
    """A model file is missing, unreadable, not GGUF, truncated or unsupported."""

    kind = ErrorKind.MODEL


class LlamaContextException(LlamaException):
    """A context could not be created (size, memory, parameters), or a prompt does not fit it."""

    kind = ErrorKind.CONTEXT


class LlamaInferenceException(LlamaException):
    """Tokenization, decoding, sampling or output parsing failed (llama.cpp, the runtime, or the model's
    output; a check of a value llamact computed itself, i.e. a llamact bug, is this kind too)."""

    kind = ErrorKind.INFERENCE


class LlamaUnsupportedException(LlamaException):
    """The request uses something this build, this model or its template does not support."""

    kind = ErrorKind.UNSUPPORTED


class LlamaStateException(LlamaException):
    """An object was used in a state that does not allow it (closed, freed, busy) or a saved state is bad."""

    kind = ErrorKind.STATE


class LlamaRequestException(LlamaException):
    """A request is malformed or contradicts itself (a message, tool, option or HTTP body field); the
    message names the field, with upstream's text where llama-server has one."""

    kind = ErrorKind.REQUEST


class LlamaTemplateException(LlamaException):
    """A chat template failed to compile or to render (``llamact.jinja``'s errors; ``source_name``
    and ``line`` in ``details`` say where)."""

    kind = ErrorKind.TEMPLATE


class LlamaArgumentException(LlamaRequestException, LlamaInferenceException):
    """A bad argument of an inference call: a prompt, token ids, text llama.cpp cannot take, a generation
    option. The caller's mistake (kind request); still a ``LlamaInferenceException``, which these
    were before errors had a kind, so code that catches that keeps working."""

    kind = ErrorKind.REQUEST


class LlamaSamplerParameterException(LlamaInferenceException, LlamaRequestException):
    """A sampling parameter llama.cpp does not take: out of its range, or a grammar it rejects (``details``
    names the sampler and value)."""

    kind = ErrorKind.REQUEST


class LlamaGrammarDeadEndException(LlamaInferenceException, LlamaRequestException):
    """The grammar admits no token of the model's vocabulary at this point of the output: the
    constraint cannot be met (e.g. a schema whose minimum is above its maximum)."""

    kind = ErrorKind.REQUEST


class LlamaTokenLimitException(LlamaInferenceException, LlamaRequestException):
    """A text holds more tokens than the caller's limit; ``details["at_least"]`` is a count it surely
    reaches (a huge text is counted on a prefix, see ``llamact.native.token_limit``) and
    ``details["exact"]`` whether that count is the whole text's."""

    kind = ErrorKind.REQUEST


class LlamaMediaException(LlamaInferenceException, LlamaRequestException):
    """An image or audio medium of a request cannot be used: bytes that are no image or audio file
    mtmd reads, a format or source that is not allowed, a medium past the pixel or duration limit."""

    kind = ErrorKind.REQUEST


# the class of each kind: every exception of kind K derives from KIND_CLASSES[K]
KIND_CLASSES: dict[ErrorKind, type[LlamaException]] = {
    ErrorKind.REQUEST: LlamaRequestException,
    ErrorKind.UNSUPPORTED: LlamaUnsupportedException,
    ErrorKind.TEMPLATE: LlamaTemplateException,
    ErrorKind.CONTEXT: LlamaContextException,
    ErrorKind.MODEL: LlamaModelException,
    ErrorKind.INFERENCE: LlamaInferenceException,
    ErrorKind.STATE: LlamaStateException,
    ErrorKind.UNCLASSIFIED: LlamaException,
}


__all__ = [
    "ErrorKind",
    "KIND_CLASSES",
    "LlamaException",
    "LlamaModelException",
    "LlamaContextException",
    "LlamaInferenceException",
    "LlamaUnsupportedException",
    "LlamaStateException",
    "LlamaRequestException",
    "LlamaTemplateException",
    "LlamaArgumentException",
    "LlamaSamplerParameterException",
    "LlamaGrammarDeadEndException",
    "LlamaTokenLimitException",
    "LlamaMediaException",
]
