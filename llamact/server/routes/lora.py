"""``GET /lora-adapters`` and ``POST /lora-adapters``: the adapters loaded with ``--lora`` /
``--lora-scaled``, and their scales, as llama-server lists and sets them.

GET lists each adapter by its index (``id``), with the path as given on the command line, its scale,
and the adapter's ``task_name`` / ``prompt_prefix`` (empty: llamact does not read those metadata
keys). POST takes a JSON array of ``{"id", "scale"}`` (llama-server's ``parse_lora_request``: a
missing or mistyped id is -1, a missing scale 0); every adapter it leaves out gets scale 0, as
``construct_lora_list`` does, and an id that names no adapter is ignored. As upstream, the new scales
are the server's defaults from the next request on (``server.lora_control`` applies them when a
request starts); a request's own ``lora`` field overrides them for that request.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..lora_control import parse_lora_request
from ..protocol import error_response, exception_response
from ..slot_info import f32
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


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
