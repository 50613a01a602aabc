"""The admin family: the server's own state and controls, as llama-server answers them.

**The server's state.** ``/health`` (503 while the one model loads; a router is healthy once it
listens), ``/v1/models`` and ``/models`` (the model, or router mode's catalogue in llama-server's
router shape), ``/props`` (GET: the model's, or the router's own without ``?model=``; POST behind
``--props``), ``/metrics`` (llama-server's fields and metric names, then the inference gateway's gauges under
vLLM's names: ``models.gateway_metrics``) and the page at ``/``.

**Router mode's own routes**, as llama-server's router has them: ``POST /models/load`` and
``/models/unload`` (``{"model": NAME}``), and ``GET /models/sse`` (each model's status changes as
server-sent events ``{"model", "event": "model_status", "data": {"status"}}``). Outside router mode
they are 404, as llama-server without a router. Answers (``models.model_router``): load and unload
answer ``{"success": true}`` once done -- a load after the model is ready (or 503 with why it
failed), an unload after the model's running requests have ended and it is freed (llama-server
answers at once and loads or stops in the background; a client then polls ``/models``). A name the
server does not know: load 404, unload 400 (llama-server's statuses and words: "model is not
found"); load of a running model, unload of one that is not: 400 "model is already running" /
"model is not running".

**LoRA adapters.** ``GET /lora-adapters`` lists the adapters loaded with ``--lora`` /
``--lora-scaled`` by their index (``id``), with the path as given on the command line, its scale,
and the adapter's ``task_name`` / ``prompt_prefix`` (empty: llamact does not read those metadata
keys). ``POST /lora-adapters`` takes a JSON array of ``{"id", "scale"}`` (llama-server's
``parse_lora_request``: a missing or mistyped id is -1, a missing scale 0); every adapter it leaves
out gets scale 0, as ``construct_lora_list`` does, and an id that names no adapter is ignored. As
upstream, the new scales are the server's defaults from the next request on (``serving.lora``
applies them when a request starts); a request's own ``lora`` field overrides them for that request.

**Features this server lacks**: llama-server's routes for them, answered as llama-server answers
them when the feature is off (so a client learns what is missing, not that the path is unknown):
``/tools`` and ``/cors-proxy`` (the web UI's server-side tools and MCP proxy, ``--tools``,
``--ui-mcp-proxy`` upstream) 403 ``feature_disabled``, as llama-server without those flags;
``/v1/audio/transcriptions`` (speech to text needs an audio projector, ``--mmproj``) 501
``not_supported_error``, as llama-server on a model without one, before reading the body (a
multipart form upstream), so the JSON body rules do not apply.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator
from functools import lru_cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

from ..http.body import json_body
from ..http.errors import RequestError, error_response, exception_response
from ..models.gateway_metrics import GatewayGauges, kv_cells, on_slots
from ..models.model_router import ModelEntry, ModelRouter, model_meta
from ..models.state import STATE_KEY, state_of
from ..serving.lora import parse_lora_request
from ..wire.task_params import f32
from .wire import props_body, router_props

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
    try:
        return JSONResponse(props_body(state.engine, model_alias=state.model_name, model_path=str(state.model_file),
                                       n_slots=settings.parallel, n_predict=settings.n_predict,
                                       endpoint_slots=settings.slots, endpoint_props=settings.props,
                                       sampling=settings.sampling_defaults(), tools_supported=state.tools_supported,
                                       template_family=state.template_family))
    except Exception as exc:   # a JSON error, never a bare 500
        return exception_response(exc)


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
    # processing: on a slot, or being prepared for one (a long set-up is work in progress)
    running = worker.n_running
    if scheduler is not None:
        waiting = scheduler.n_waiting + worker.n_waiting
        decodes = (scheduler.n_decodes, scheduler.n_busy_slots, scheduler.n_tokens_max)
    else:
        waiting, decodes = worker.n_waiting, (0, 0, 0)
    speculator = state.engine.speculator
    text = state.metrics.prometheus(running, waiting, worker.n_cancelled, *decodes,
                                    speculative=speculator.totals if speculator else None)
    adapters_running, adapters_waiting = state.metrics.adapters.snapshot()
    gateway_waiting, gateway_running = on_slots(waiting, running, scheduler.n_active if scheduler else None)
    gateway = GatewayGauges(gateway_waiting, gateway_running, *kv_cells(state.engine, scheduler), len(state.loras),
                            tuple(adapters_running), tuple(adapters_waiting))
    return PlainTextResponse(text + gateway.prometheus(), media_type="text/plain; version=0.0.4")


# -- the page at / ------------------------------------------------------------------------------------

# index.html names its stylesheet and scripts as files beside it (so it opens from disk as it is); the
# route puts them inline, so the page is one response on the one public path (http.edge.PUBLIC_PATHS)
_ASSET = re.compile(r'<link rel="stylesheet" href="([\w.-]+\.css)">|<script src="([\w.-]+\.js)"></script>')


@lru_cache(maxsize=1)
def _page() -> tuple[str, str]:
    """The page with its assets inline, and its Content-Security-Policy: the inline scripts and styles
    allowed by their hashes, calls to this server only, images from the page itself -- so text a model
    writes could not run as script even if it ever reached the page as HTML (it does not: markdown.js)."""
    static = resources.files("llamact.server").joinpath("static")
    hashes: dict[str, list[str]] = {"script": [], "style": []}

    def inline(match: re.Match[str]) -> str:
        css, js = match.groups()
        tag = "style" if css else "script"
        text = static.joinpath(css or js).read_text(encoding="utf-8")
        if f"</{tag}" in text.lower():
            raise ValueError(f"{css or js} holds </{tag}: it cannot be inlined")
        hashes[tag].append("'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'")
        return f"<{tag}>{text}</{tag}>"

    html = _ASSET.sub(inline, static.joinpath("index.html").read_text(encoding="utf-8"))
    policy = (f"default-src 'none'; script-src {' '.join(hashes['script'])}; style-src {' '.join(hashes['style'])}; "
              "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'")
    return html, policy


@router.get("/")
async def page() -> Response:
    html, policy = _page()
    return HTMLResponse(html, headers={"Content-Security-Policy": policy})


# -- router mode's model routes -----------------------------------------------------------------------


async def _entry(request: Request, missing_status: int) -> ModelEntry:
    body = await json_body(request)
    name = body.get("model") if isinstance(body, dict) else None
    entry = _router(request).find(name) if isinstance(name, str) else None
    if entry is None:
        raise RequestError("model is not found", status=missing_status)
    return entry


def _not_a_router() -> Response:
    return error_response("File Not Found", "not_found_error", 404)


@router.post("/models/load")
async def load(request: Request) -> Response:
    models = _router(request)
    if not models.routing:
        return _not_a_router()
    try:
        await models.load(await _entry(request, 404))
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"success": True})


@router.post("/models/unload")
async def unload(request: Request) -> Response:
    models = _router(request)
    if not models.routing:
        return _not_a_router()
    try:
        await models.unload(await _entry(request, 400))
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"success": True})


@router.get("/models/sse")
async def events(request: Request) -> Response:
    models = _router(request)
    if not models.routing:
        return _not_a_router()
    updates = models.subscribe()

    async def lines() -> AsyncIterator[bytes]:
        async for event in updates:
            yield f"data: {json.dumps(event)}\n\n".encode()

    return StreamingResponse(lines(), media_type="text/event-stream")


# -- LoRA adapters ------------------------------------------------------------------------------------


@router.get("/lora-adapters")
async def get_lora_adapters(request: Request) -> Response:
    state = state_of(request)
    return JSONResponse([{"id": i, "path": path, "scale": scale, "task_name": "", "prompt_prefix": ""}
                         for i, (path, scale) in enumerate(state.loras)])


@router.post("/lora-adapters")
async def post_lora_adapters(request: Request) -> Response:
    state = state_of(request)
    try:
        body = await json_body(request)
        if not isinstance(body, list):
            return error_response("Request body must be an array")
        config = parse_lora_request(body)
        state.loras = [[path, f32(config.get(i, 0.0))] for i, (path, _scale) in enumerate(state.loras)]
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"success": True})


# -- features this server lacks -----------------------------------------------------------------------


@router.get("/tools")
@router.post("/tools")
@router.get("/cors-proxy")
@router.post("/cors-proxy")
async def feature_disabled() -> Response:
    # llama-server's res_403: an error object without a code
    return JSONResponse({"error": {"message": "this feature is disabled", "type": "feature_disabled"}},
                        status_code=403)


@router.post("/v1/audio/transcriptions")
@router.post("/audio/transcriptions")
async def transcriptions() -> Response:
    return error_response("The current model does not support audio input.", "not_supported_error", 501)
