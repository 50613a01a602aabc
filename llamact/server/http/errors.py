"""Errors at the HTTP edge: llama-server's error shape, and the one table saying which status and
error type each kind of failure is answered with, for every route and every stream.

    raise RequestError(message, status=413)          a request the server refuses (400 unless said)
    error_response(message, "not_supported_error", 501)   an answer in llama-server's error shape
    exception_response(exc)                          the answer to a request that failed: ANSWERS[kind]
    error_answer(exc) -> (status, type)              the same choice, for a stream's error event

llama-server sorts failures by C++ class (``ex_wrapper``: ``std::invalid_argument`` is 400
``invalid_request_error``, a prompt too long 400 ``exceed_context_size_error``, anything else 500
``server_error``). Here a failure's kind says it (``ANSWERS``): the request's fault (a malformed
body, a grammar that does not parse or is over a limit, a body nested deeper than code below can
follow) and what the template or the schema converter cannot do (upstream's converter and
autoparser throw ``invalid_argument`` there) are 400; a prompt too long 400
``exceed_context_size_error``; a template failing to render in a family's handler, a failed decode,
a bug: 500. A ``RequestError`` carries its own status (413 too large, 415 not JSON, 499 the client
left, 503 the server stops, 404 router mode's unknown model). After a stream's first event every
failure but the server's own stop is a ``server_error`` (``http.sse``). Statuses a route decides
without an exception (501 for a capability the server lacks, 404 for a path it does not serve) are
written with ``error_response`` where the route decides them.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi.responses import JSONResponse

from ...errors import (
    LlamaContextException,
    LlamaException,
    LlamaGrammarDeadEndException,
    LlamaInferenceException,
    LlamaMediaException,
    LlamaRequestException,
    LlamaSamplerParameterException,
    LlamaStateException,
    LlamaTemplateException,
    LlamaTokenLimitException,
    LlamaUnsupportedException,
)
from ...grammar.gbnf import GbnfError

__all__ = ["ANSWERS", "SERVER_ERROR", "RequestError", "error_answer", "error_body", "error_response",
           "exception_response", "kind_of"]

log = logging.getLogger("llamact.server")


class RequestError(LlamaRequestException):
    """A request the server refuses as it stands (HTTP 400, or ``status``: 413 too large, 415 not JSON)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# The one table: a kind of failure -> (HTTP status, llama-server's error type).
ANSWERS: dict[str, tuple[int, str]] = {
    "request": (400, "invalid_request_error"),
    "unsupported": (400, "invalid_request_error"),
    "context": (400, "exceed_context_size_error"),
    "template": (500, "server_error"),
    "inference": (500, "server_error"),
    "state": (500, "server_error"),
}
SERVER_ERROR = (500, "server_error")   # a failure of no known kind: a bug
# a RequestError's own status that has a type of its own (404: router mode's unknown model, as llama-server)
_STATUS_TYPES = {404: "not_found_error", 503: "unavailable_error"}

# The kind of each exception class, found along the class's MRO (its first class listed here wins).
# When errors.py declares a ``kind`` on every class (issue 41 item 3), ``kind_of`` reads that and this
# table goes. The four classes that are both an inference failure and the caller's request are listed
# because their MRO meets LlamaInferenceException before LlamaRequestException; a model that fails to
# load, and LlamaException itself, have no kind here: 500.
_CLASS_KINDS: dict[type[BaseException], str] = {
    LlamaRequestException: "request",
    LlamaSamplerParameterException: "request",
    LlamaGrammarDeadEndException: "request",
    LlamaTokenLimitException: "request",
    LlamaMediaException: "request",
    GbnfError: "request",          # a request's grammar that does not parse, or is over a limit
    RecursionError: "request",     # a body nested deeper than some code below can follow
    LlamaUnsupportedException: "unsupported",
    LlamaContextException: "context",
    LlamaTemplateException: "template",
    LlamaInferenceException: "inference",
    LlamaStateException: "state",
}


def kind_of(exc: BaseException) -> str | None:
    """The kind of failure ``exc`` is (a key of ``ANSWERS``), None for one of no known kind."""
    # TO REMOVE once the native sampler raises a request error for a grammar llama.cpp refuses (issue 41
    # item 3): that rejection ("a"**: left recursion) is a LlamaInferenceException naming the sampler
    if isinstance(exc, LlamaInferenceException) and exc.details.get("sampler") == "Grammar":
        return "request"
    for cls in type(exc).__mro__:
        kind = _CLASS_KINDS.get(cls)
        if kind is not None:
            return kind
    return None


def error_answer(exc: BaseException) -> tuple[int, str]:
    """The status and llama-server's error type for a request that failed with ``exc``."""
    if isinstance(exc, RequestError):
        return exc.status, _STATUS_TYPES.get(exc.status, ANSWERS["request"][1])
    kind = kind_of(exc)
    return ANSWERS[kind] if kind is not None else SERVER_ERROR


def error_body(message: str, error_type: str, code: int) -> Any:
    return {"error": {"code": code, "message": message, "type": error_type}}


def error_response(message: str, error_type: str = "invalid_request_error", code: int = 400) -> JSONResponse:
    return JSONResponse(error_body(message, error_type, code), status_code=code)


def exception_response(exc: BaseException) -> JSONResponse:
    """The answer to a request that failed before its first event (see the module docstring)."""
    code, error_type = error_answer(exc)
    if isinstance(exc, RecursionError):   # the last line of defence behind the body's depth limit
        return error_response("the request is nested too deeply for the server to read it", error_type, code)
    if not isinstance(exc, LlamaException):
        log.exception("request failed", exc_info=exc)
        return error_response(f"{type(exc).__name__}: {exc}", error_type, code)
    return error_response(str(exc), error_type, code)
