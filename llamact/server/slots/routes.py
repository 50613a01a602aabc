"""``GET /slots`` and ``POST /slots/{id}?action=save|restore|erase``, as llama-server answers them.

``GET /slots`` is on unless ``--no-slots`` (then 501); ``?fail_on_no_slot`` makes it 503 when every
slot is busy. The actions need ``--slot-save-path`` (else 501, upstream's refusal) and run on the
slot once it holds no request (llama-server defers them the same way): on the engine's worker with
one slot, on the scheduler's thread with ``--parallel N``. ``save`` writes the slot's KV cache and
tokens with ``llama_state_seq_save_file`` into the save directory, its tokens packed as
``server_tokens::serialize`` packs them (``engine.slot_state``: a file llama-server saved restores
here, and back); ``restore`` loads one into the slot, whose next
request then reuses it as a prompt cache; ``erase`` empties it. A filename is checked as upstream's
``fs_validate_filename`` checks it before anything touches the disk (``slots.wire``).

Deviations (docs/design.md, deviation 12): a body that is not JSON, or lacks a string ``filename``,
is a 400 ``invalid_request_error`` here where llama-server answers 500 with nlohmann::json's
exception text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..http.body import json_body
from ..http.errors import SERVER_ERROR, RequestError, error_response, exception_response
from ..models.state import ServerState, state_of
from .wire import parse_slot_id, slot_path, slots_json

__all__ = ["Done", "router"]

router = APIRouter()
NOT_SUPPORTED = "not_supported_error"


@router.get("/slots")
async def get_slots(request: Request) -> Response:
    state = state_of(request)
    if not state.settings.slots:
        return error_response("This server does not support slots endpoint. Start it with `--slots`",
                              NOT_SUPPORTED, 501)
    states = slot_states(state)
    if "fail_on_no_slot" in request.query_params and request.query_params["fail_on_no_slot"] != "":
        if all(busy for busy, _n in states):
            return error_response("no slot available", "unavailable_error", 503)
    return JSONResponse(slots_json(state.slot_tasks, states, state.engine.n_ctx_seq))


def slot_states(state: ServerState) -> list[tuple[bool, int]]:
    """(is processing, tokens in its KV cache) for each slot."""
    if state.scheduler is not None:
        return state.scheduler.slot_states()
    return [(state.worker.n_running > 0, len(state.engine.context_tokens))]


class Done:
    """A stream of no items: how a slot action runs on the engine's worker, in turn with requests."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        pass


async def _on_slot(state: ServerState, seq: int, on_engine: Callable[[Any], Any],
                   on_scheduler: Callable[[Any, int], Any]) -> Any:
    """Run the action when slot ``seq`` is free: its value, or its exception."""
    if state.scheduler is not None:
        return await asyncio.wrap_future(on_scheduler(state.scheduler, seq))
    job = state.worker.submit(lambda engine: Done(on_engine(engine)), lambda done: done.value)
    async for _item in job:
        pass
    return job.result


def _filename(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("filename"), str):
        raise RequestError("the body must be a JSON object with a string 'filename'")
    name: str = body["filename"]
    return name


@router.post("/slots/{id_slot}")
async def post_slots(request: Request, id_slot: str) -> Response:
    state = state_of(request)
    directory = state.settings.slot_save_path
    if directory is None:
        return error_response("This server does not support slots action. Start it with `--slot-save-path`",
                              NOT_SUPPORTED, 501)
    ids = parse_slot_id(id_slot, state.engine.n_seq_max)
    if ids is None:
        return error_response("Invalid slot ID")
    given, seq = ids
    action = request.query_params.get("action", "")
    try:
        if action == "erase":
            return JSONResponse({"id_slot": given, "n_erased": await _on_slot(
                state, seq, lambda engine: engine.clear_cache(), lambda scheduler, s: scheduler.erase_slot(s))})
        if action not in ("save", "restore"):
            return error_response("Invalid action")
        name = _filename(await json_body(request))
        try:
            path = slot_path(directory, name)
        except ValueError as exc:
            return error_response(str(exc))
        if action == "save":
            return await _save(state, given, seq, name, path)
        return await _restore(state, given, seq, name, path)
    except Exception as exc:
        return exception_response(exc)


async def _save(state: ServerState, given: int, seq: int, name: str, path: Path) -> Response:
    t0 = time.perf_counter()

    try:
        n_saved = await _on_slot(state, seq, lambda engine: engine.save_slot(path),
                                 lambda scheduler, s: scheduler.save_slot(s, path))
    except Exception:
        code, error_type = SERVER_ERROR
        return error_response("Unable to save slot", error_type, code)
    return JSONResponse({"id_slot": given, "filename": name, "n_saved": n_saved, "n_written": path.stat().st_size,
                         "timings": {"save_ms": (time.perf_counter() - t0) * 1000}})


async def _restore(state: ServerState, given: int, seq: int, name: str, path: Path) -> Response:
    t0 = time.perf_counter()
    try:
        n_restored = await _on_slot(state, seq, lambda engine: engine.restore_slot(path),
                                    lambda scheduler, s: scheduler.restore_slot(s, path))
    except Exception:
        return error_response("Unable to restore slot: No available space in KV cache or invalid slot save file")
    return JSONResponse({"id_slot": given, "filename": name, "n_restored": n_restored,
                         "n_read": path.stat().st_size, "timings": {"restore_ms": (time.perf_counter() - t0) * 1000}})
