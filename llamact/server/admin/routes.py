"""The server's own state: ``/health`` (503 while the one model loads; a router is healthy once it
listens), ``/v1/models`` and ``/models`` (the model, or router mode's catalogue in llama-server's
router shape), ``/props`` (GET: the model's, or the router's own without ``?model=``; POST behind
``--props``), ``/metrics`` (llama-server's fields and metric names) and the page at ``/``."""

from __future__ import annotations

import time
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from ..props import props_body, router_props
from ..protocol import error_response
from ..router import ModelRouter, model_meta
from ..state import STATE_KEY, state_of

__all__ = ["router"]

router = APIRouter()


@router.get("/health")
@router.get("/v1/health")
async def health(request: Request) -> Response:
    models = _router(request)
    if not models.routing:
        entry = models.only
        if entry.state is None or not entry.state.loaded:
            return error_response(entry.error or "Loading model", "unavailable_error", 503)
    return JSONResponse({"status": "ok"})


def _router(request: Request) -> ModelRouter:
    models: ModelRouter = request.app.state.llamact
    return models


@router.get("/v1/models")
@router.get("/models")
async def models(request: Request) -> Response:
    models = _router(request)
    if models.routing:
        return JSONResponse({"data": models.listing(), "object": "list"})
    state = state_of(request)
    info = {"id": state.model_name, "aliases": list(models.only.spec.aliases), "tags": [], "object": "model",
            "created": int(time.time()), "owned_by": "llamacpp", "meta": model_meta(state)}
    return JSONResponse({"models": [{"name": state.model_name, "model": state.model_name}],
                         "object": "list", "data": [info]})


@router.get("/props")
async def props(request: Request) -> Response:
    if STATE_KEY not in request.scope:   # a router asked about no model
        settings = _router(request).settings
        return JSONResponse(router_props(settings.models_max, settings.models_autoload))
    state = state_of(request)
    settings = state.settings
    return JSONResponse(props_body(state.engine, model_alias=state.model_name, model_path=str(state.model_file),
                                   n_slots=settings.parallel, n_predict=settings.n_predict,
                                   endpoint_slots=settings.slots, endpoint_props=settings.props,
                                   sampling=settings.sampling_defaults(), tools_supported=state.tools_supported))


@router.post("/props")
async def post_props(request: Request) -> Response:
    """llama-server's POST /props: refused (501) without ``--props``; with it, at the pin, it changes
    nothing and answers success (its handler reads no field of the body)."""
    if not state_of(request).settings.props:
        return error_response("This server does not support changing global properties. Start it with `--props`",
                              "not_supported_error", 501)
    return JSONResponse({"success": True})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = state_of(request)
    worker, scheduler = state.worker, state.scheduler
    if scheduler is not None:
        running, waiting = scheduler.n_active, scheduler.n_waiting + worker.n_waiting
        decodes = (scheduler.n_decodes, scheduler.n_busy_slots, scheduler.n_tokens_max)
    else:
        running, waiting, decodes = worker.n_running, worker.n_waiting, (0, 0, 0)
    speculator = state.engine.speculator
    return PlainTextResponse(state.metrics.prometheus(running, waiting, worker.n_cancelled, *decodes,
                                                      speculative=speculator.totals if speculator else None),
                             media_type="text/plain; version=0.0.4")


@router.get("/")
async def page() -> Response:
    html = resources.files("llamact.server").joinpath("static/index.html").read_text(encoding="utf-8")
    return HTMLResponse(html)
