"""``GET /lora-adapters`` and ``POST /lora-adapters``: the adapters loaded with ``--lora`` /
``--lora-scaled``, and their scales, as llama-server lists and sets them.

GET lists each adapter by its index (``id``), with the path as given on the command line, its scale,
and the adapter's ``task_name`` / ``prompt_prefix`` (empty: llamact does not read those metadata
keys). POST takes a JSON array of ``{"id", "scale"}`` (llama-server's ``parse_lora_request``: a
missing or mistyped id is -1, a missing scale 0); every adapter it leaves out gets scale 0, as
``construct_lora_list`` does, and an id that names no adapter is ignored. The new scales apply from
the next request: with one slot on the engine's worker in turn with requests, with ``--parallel N``
once no slot holds a request (llama-server switches adapters per request; llamact's context has one
set for all its sequences). The KV caches are emptied: they were computed with the old weights.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..protocol import error_response, exception_response
from ..state import ServerState, state_of
from .body import json_body
from .slots import Done

__all__ = ["parse_lora_request", "router"]

router = APIRouter()


def _number(value: Any, default: float) -> float:
    """nlohmann's json_value: a number (bools are not) or the default."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def parse_lora_request(body: list[Any]) -> dict[int, float]:
    """id -> scale, the later entry winning (``parse_lora_request``)."""
    out: dict[int, float] = {}
    for entry in body:
        entry = entry if isinstance(entry, dict) else {}
        raw_id = entry.get("id", -1)
        lora_id = int(raw_id) if isinstance(raw_id, int) and not isinstance(raw_id, bool) else -1
        out[lora_id] = _number(entry.get("scale", 0.0), 0.0)
    return out


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
        scales = [config.get(i, 0.0) for i in range(len(state.loras))]
        await apply_scales(state, scales)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"success": True})


async def apply_scales(state: ServerState, scales: list[float]) -> None:
    """Set the loaded adapters' scales (see the module docstring for when they apply)."""
    paths = [path for path, _scale in state.loras]

    def apply(engine: Any) -> int:
        for path, scale in zip(paths, scales, strict=True):
            engine.set_lora(path, scale)
        return len(paths)

    if state.scheduler is not None:
        engine = state.engine
        await asyncio.wrap_future(state.scheduler.when_idle(lambda: apply(engine)))
    else:
        job = state.worker.submit(lambda engine: Done(apply(engine)))
        async for _item in job:
            pass
    state.loras = [[path, scale] for path, scale in zip(paths, scales, strict=True)]
