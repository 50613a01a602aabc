"""The HTTP side of ``llamact serve``: llama-server's routes over one ``LlamaEngine`` per model.

    create_app(settings | catalogue) -> FastAPI    models load in the background; /health answers 503 until then

Routes and shapes follow tools/server at the pin, one folder per API family (``ROUTERS``: each
family's ``routes.py``; its ``wire.py`` reads the bodies and writes the answers, its ``stream.py``
the events where it has its own): chat, raw completions in OpenAI's shape and llama-server's own
(``/completion``, ``/infill``), Responses, Anthropic's Messages, embeddings and rerank, templates and
tokens, slots, and the admin routes (health / models / props / metrics / LoRA / the page, router
mode's model routes). Errors are answered in OpenAI's shape (``{"error": {"code", "message",
"type"}}``) with the status ``http.errors`` gives each kind of failure. Generation runs on a model's
engine (one request at a time) or, with ``--parallel N`` > 1, on a ``BatchScheduler``'s N slots
(``models.state``, ``runners``).

A request passes, outermost first: CORS (``--cors-origins``: preflights answered here), the prefix
(``--api-prefix``), the access log (``http.logs``), the API key (``http.edge``), the model's choice
and lease (``models.dispatch``, ``models.model_router``), then its family's route.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.requests import Request

from .admin import routes as admin
from .chat import routes as chat
from .completions import routes as completions
from .config.settings import ServerSettings
from .embeddings import routes as embeddings
from .http.edge import HeadAsGet, KeyGuard, Prefix, api_keys, cors_middleware
from .http.errors import error_response
from .http.logs import AccessLog, ServerLog
from .messages import routes as messages
from .models.catalogue import Catalogue, ModelSpec
from .models.dispatch import Dispatch
from .models.model_router import ModelRouter
from .native import routes as native
from .responses import routes as responses
from .slots import routes as slots
from .templates import routes as templates

__all__ = ["CLOSE_WAIT_S", "ROUTERS", "create_app"]

log = logging.getLogger("llamact.server")
CLOSE_WAIT_S = 2.0   # how long stopping the workers may take once their requests are cancelled
# every API family's routes
ROUTERS: tuple[APIRouter, ...] = (admin.router, chat.router, completions.router, native.router, responses.router,
                                  messages.router, embeddings.router, templates.router, slots.router)


async def _not_routed(request: Request, exc: Exception) -> Response:
    """A path or method no route serves: llama-server's 404 in its error shape (cpp-httplib answers a
    known path with another method 404 too, where FastAPI would say 405 ``{"detail": ...}``)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status in (404, 405):
        return error_response("File Not Found", "not_found_error", 404)
    return error_response(str(getattr(exc, "detail", exc)), "invalid_request_error", status)


def _catalogue(settings: ServerSettings | Catalogue) -> Catalogue:
    if isinstance(settings, Catalogue):
        return settings
    name = settings.model_name()
    return Catalogue(settings, (ModelSpec(name, settings, settings.alias[1:], "cli", True),), router=False)


def create_app(settings: ServerSettings | Catalogue, *, server_log: ServerLog | None = None,
               load_in_background: bool = True) -> FastAPI:
    """The application; its models load when it starts (``app.state.llamact``: its ``ModelRouter``)."""
    catalogue = _catalogue(settings)
    server = catalogue.settings
    out = server_log or ServerLog(server.log_format)
    models = ModelRouter(catalogue, out)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        startup = [e for e in models.entries.values() if e.spec.load_on_startup]
        for entry in startup:
            models.start_loading(entry)
        if not load_in_background:
            while any(e.status == "loading" for e in startup):
                await asyncio.sleep(0.01)
        try:
            yield
        finally:   # the engine's abort stops a decode at once; a native call that does not return is left
            if not await asyncio.to_thread(models.close, CLOSE_WAIT_S):
                log.error("a request is still running in native code after %s s; the engine is left unfreed",
                          CLOSE_WAIT_S)

    app = FastAPI(title="llamact", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.llamact = models
    app.add_exception_handler(HTTPException, _not_routed)
    app.add_middleware(Dispatch, router=models, routes=app.routes)
    app.add_middleware(KeyGuard, keys=api_keys(server))
    app.add_middleware(AccessLog, log=out, log_prompts=server.log_prompts)
    app.add_middleware(Prefix, prefix=server.api_prefix)
    app.add_middleware(HeadAsGet)
    cors = cors_middleware(server)
    if cors is not None:
        app.add_middleware(cors[0], **cors[1])  # type: ignore[arg-type]
    for router in ROUTERS:
        app.include_router(router)
    return app
