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

from ...errors import ErrorKind, LlamaException, LlamaRequestException

__all__ = ["ANSWERS", "SERVER_ERROR", "RequestError", "error_answer", "error_body", "error_response",
           "exception_response", "kind_of"]

log = logging.getLogger("llamact.server")


class RequestError(LlamaRequestException):
    """A request the server refuses as it stands (HTTP 400, or ``status``: 413 too large, 415 not JSON)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# The one table: a kind of failure (what each exception class declares) -> (HTTP status, llama-server's
# error type). A model that fails to load under a request, and an exception of no declared kind, are 500.
ANSWERS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.REQUEST: (400, "invalid_request_error"),
    ErrorKind.UNSUPPORTED: (400, "invalid_request_error"),
    ErrorKind.CONTEXT: (400, "exceed_context_size_error"),
    ErrorKind.TEMPLATE: (500, "server_error"),
    ErrorKind.MODEL: (500, "server_error"),
    ErrorKind.INFERENCE: (500, "server_error"),
    ErrorKind.STATE: (500, "server_error"),
    ErrorKind.UNCLASSIFIED: (500, "server_error"),
}
SERVER_ERROR = (500, "server_error")   # a failure that is no LlamaException: a bug
# a RequestError's own status that has a type of its own (404: router mode's unknown model, as llama-server)
_STATUS_TYPES = {404: "not_found_error", 503: "unavailable_error"}


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The kind of failure ``exc`` is (a key of ``ANSWERS``): the kind its class declares; a
    ``RecursionError`` (a body nested deeper than some code below can follow) is the request's; None
    for anything else (a bug)."""
    if isinstance(exc, LlamaException):
        return exc.kind
    if isinstance(exc, RecursionError):
        return ErrorKind.REQUEST
    return None


def error_answer(exc: BaseException) -> tuple[int, str]:
    """The status and llama-server's error type for a request that failed with ``exc``."""
    if isinstance(exc, RequestError):
        return exc.status, _STATUS_TYPES.get(exc.status, ANSWERS[ErrorKind.REQUEST][1])
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
