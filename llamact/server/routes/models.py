"""Router mode's own routes, as llama-server's router has them: ``POST /models/load`` and
``/models/unload`` (``{"model": NAME}``), and ``GET /models/sse`` (each model's status changes as
server-sent events ``{"model", "event": "model_status", "data": {"status"}}``). Outside router mode
they are 404, as llama-server without a router.

Answers (``server.router``): load and unload answer ``{"success": true}`` once done -- a load after the
model is ready (or 503 with why it failed), an unload after the model's running requests have ended
and it is freed (llama-server answers at once and loads or stops in the background; a client then
polls ``/models``). A name the server does not know: load 404, unload 400 (llama-server's statuses and
words: "model is not found"); load of a running model, unload of one that is not: 400 "model is
already running" / "model is not running".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..protocol import RequestError, error_response, exception_response
from ..router import ModelEntry, ModelRouter
from .body import json_body

__all__ = ["router"]

router = APIRouter()


def _models(request: Request) -> ModelRouter:
    models: ModelRouter = request.app.state.llamact
    return models


async def _entry(request: Request, missing_status: int) -> ModelEntry:
    body = await json_body(request)
    name = body.get("model") if isinstance(body, dict) else None
    entry = _models(request).find(name) if isinstance(name, str) else None
    if entry is None:
        raise RequestError("model is not found", status=missing_status)
    return entry


def _not_a_router() -> Response:
    return error_response("File Not Found", "not_found_error", 404)


@router.post("/models/load")
async def load(request: Request) -> Response:
    models = _models(request)
    if not models.routing:
        return _not_a_router()
    try:
        await models.load(await _entry(request, 404))
    except Exception as exc:
        if isinstance(exc, RequestError) and exc.status == 404:
            return error_response(str(exc), "not_found_error", 404)
        return exception_response(exc)
    return JSONResponse({"success": True})


@router.post("/models/unload")
async def unload(request: Request) -> Response:
    models = _models(request)
    if not models.routing:
        return _not_a_router()
    try:
        await models.unload(await _entry(request, 400))
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"success": True})


@router.get("/models/sse")
async def events(request: Request) -> Response:
    models = _models(request)
    if not models.routing:
        return _not_a_router()
    updates = models.subscribe()

    async def lines() -> AsyncIterator[bytes]:
        async for event in updates:
            yield f"data: {json.dumps(event)}\n\n".encode()

    return StreamingResponse(lines(), media_type="text/event-stream")
