"""Which model a request is for, held for as long as the request runs: the ASGI middleware between the
edge and the routes, so every route asks ``state_of(request)`` and finds its model's ``ServerState``.

    Dispatch(app, router, routes)

With one model (``-m``) every request gets it, and is answered 503 (``Loading model``, or why loading
failed) until it is loaded; ``/health`` and the page are answered meanwhile. In router mode a request
names its model as OpenAI's API does -- the body's ``model`` for a POST, ``?model=`` for a GET (and
for a POST whose body has none, such as ``/slots/{id}?action=erase``); the name may be an alias:

* no name: 400 ``model name is missing from the request`` (llama-server's words);
* a name the server does not know: 404 in OpenAI's shape (``code: model_not_found``; llama-server
  answers 400), listing the names it knows;
* a known one: held (``ModelRouter.lease``: loaded first, or waited for) until the response has ended
  -- a stream's last event included -- so it is never unloaded under a request.

The routes of the server itself (``/health``, ``/v1/models``, ``/models``, ``/models/load|unload|sse``,
the page, ``GET /props`` without ``?model=``) need no model; nor does a path no route serves (its 404).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Match

from ..http.body import json_body
from ..http.errors import RequestError, error_response, exception_response
from ..http.logs import MODEL_KEY
from .model_router import ModelRouter
from .state import STATE_KEY

__all__ = ["MODEL_FREE_PATHS", "Dispatch"]

MODEL_FREE_PATHS = frozenset({"/health", "/v1/health", "/", "/v1/models", "/models", "/models/load",
                              "/models/unload", "/models/sse", "/tools", "/cors-proxy",
                              "/v1/audio/transcriptions", "/audio/transcriptions"})
_ALWAYS_ANSWERED = frozenset({"/health", "/v1/health", "/"})   # while the one model loads


class Dispatch:
    """See the module docstring."""

    def __init__(self, app: Any, router: ModelRouter, routes: list[Any]) -> None:
        self.app = app
        self.router = router
        self.routes = routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.router.routing:
            await self._one_model(scope, receive, send)
            return
        path = scope["path"]
        if path in MODEL_FREE_PATHS or not self._routed(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            name = await self._model_name(request)
        except Exception as exc:   # the body's own refusal (415, 413, 400)
            await exception_response(exc)(scope, receive, send)
            return
        if not name and scope["method"] == "GET" and path == "/props":   # the router's own /props
            await self.app(scope, receive, send)
            return
        if not name:
            await error_response("model name is missing from the request")(scope, receive, send)
            return
        entry = self.router.find(name)
        if entry is None:
            await self._not_found(name)(scope, receive, send)
            return
        autoload = request.query_params.get("autoload")
        try:
            state = await self.router.lease(entry, self.router.settings.models_autoload if autoload is None
                                            else autoload in ("true", "1"))
        except RequestError as exc:
            await exception_response(exc)(scope, receive, send)
            return
        scope[STATE_KEY], scope[MODEL_KEY] = state, entry.label
        try:
            await self.app(scope, receive, send)
        finally:
            self.router.release(entry)

    async def _one_model(self, scope: Any, receive: Any, send: Any) -> None:
        entry = self.router.only
        scope[MODEL_KEY] = entry.label
        if entry.state is None or not entry.state.loaded:
            if scope["path"] in _ALWAYS_ANSWERED:
                await self.app(scope, receive, send)
            else:
                await error_response(entry.error or "Loading model", "unavailable_error", 503)(scope, receive, send)
            return
        scope[STATE_KEY] = entry.state
        entry.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            entry.in_flight -= 1

    def _routed(self, scope: Any) -> bool:
        return any(route.matches(scope)[0] is Match.FULL for route in self.routes)

    @staticmethod
    async def _model_name(request: Request) -> str | None:
        """The body's ``model`` (a JSON body: another is left to the route to refuse), else ``?model=``."""
        name: Any = None
        json_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower() == "application/json"
        if request.method == "POST" and json_type and request.headers.get("content-length") != "0":
            body = await json_body(request)
            name = body.get("model") if isinstance(body, dict) else None
        if name is None:
            name = request.query_params.get("model")
        return name if isinstance(name, str) else None

    def _not_found(self, name: str) -> Any:
        known = ", ".join(sorted(self.router.entries)) or "none"
        from fastapi.responses import JSONResponse

        return JSONResponse({"error": {"message": f"The model '{name}' does not exist (this server has: {known})",
                                       "type": "invalid_request_error", "param": "model",
                                       "code": "model_not_found"}}, status_code=404)
