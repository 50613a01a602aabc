"""The HTTP side of ``llamact serve``: llama-server's routes over one ``LlamaEngine``.

    create_app(settings) -> FastAPI        the model loads in the background; /health answers 503 until then

Routes and shapes follow tools/server at the pin (``server.routes``: chat, raw completions in OpenAI's
shape and llama-server's own (``/completion``, ``/infill``), templates
and tokens, health / models / props / metrics and the page); bodies are read and answers written by
``server.protocol`` and ``server.sse``, errors in OpenAI's shape (``{"error": {"code", "message",
"type"}}``) as ``format_error_response`` makes them. Generation runs on the engine (one request at a
time) or, with ``--parallel N`` > 1, on a ``BatchScheduler``'s N slots (``server.state``). The guard
checks the API key on every path but llama-server's public ones, and answers 503 until the model is
loaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request

from .protocol import error_response
from .routes import ROUTERS
from .settings import ServerSettings
from .state import ServerState

__all__ = ["CLOSE_WAIT_S", "PUBLIC_PATHS", "create_app"]

log = logging.getLogger("llamact.server")
CLOSE_WAIT_S = 2.0   # how long stopping the workers may take once their requests are cancelled

# llama-server's public endpoints, and its page (which asks for the key itself)
PUBLIC_PATHS = frozenset({"/health", "/v1/health", "/"})


class _Guard:
    """ASGI middleware (not BaseHTTPMiddleware, which would buffer streams and hide disconnects): the API
    key on every path but the public ones, and 503 until the model is loaded."""

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Any) -> Response | None:
        key = self.state.settings.api_key
        if key:
            headers = Headers(scope=scope)
            given = headers.get("authorization") or headers.get("x-api-key") or ""
            if given.startswith("Bearer "):
                given = given[len("Bearer "):]
            if given != key:
                return error_response("Invalid API Key", "authentication_error", 401)
        if not self.state.loaded:
            return error_response(self.state.load_error or "Loading model", "unavailable_error", 503)
        return None


async def _not_routed(request: Request, exc: Exception) -> Response:
    """A path or method no route serves: llama-server's 404 in its error shape (cpp-httplib answers a
    known path with another method 404 too, where FastAPI would say 405 ``{"detail": ...}``)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status in (404, 405):
        return error_response("File Not Found", "not_found_error", 404)
    return error_response(str(getattr(exc, "detail", exc)), "invalid_request_error", status)


def create_app(settings: ServerSettings, *, load_in_background: bool = True) -> FastAPI:
    """The application; the model loads when it starts (``app.state.llamact``: its ``ServerState``)."""
    state = ServerState(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if load_in_background:
            threading.Thread(target=state.load, name="llamact-load", daemon=True).start()
        else:
            state.load()
        try:
            yield
        finally:   # the engine's abort stops a decode at once; a native call that does not return is left
            if not state.close(timeout=CLOSE_WAIT_S):
                log.error("a request is still running in native code after %s s; the engine is left unfreed",
                          CLOSE_WAIT_S)

    app = FastAPI(title="llamact", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.llamact = state
    app.add_exception_handler(HTTPException, _not_routed)
    app.add_middleware(_Guard, state=state)
    for router in ROUTERS:
        app.include_router(router)
    return app
