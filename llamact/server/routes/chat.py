"""``POST /v1/chat/completions``: a chat request on the engine, streamed as llama-server streams it
(``ChatChunk.to_openai`` events) or answered whole (``ChatCompletion.to_openai``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...engine.chat_types import system_fingerprint
from ..lora_control import ensure_scales, request_scales, with_lora
from ..protocol import exception_response, read_chat, refuse_unenforced_schema, without_stop_entries
from ..sse import event_stream, first_item, run_to_end
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/chat/completions")
@router.post("/chat/completions")
async def chat_completions(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_chat), state.defaults)
        refuse_unenforced_schema(call.request, state.defaults)
    except Exception as exc:
        return exception_response(exc)
    streams: list[Any] = []

    loras = state.loras
    scales = request_scales(loras, lora)

    def start(backend: Any) -> Any:   # on the worker: an engine, or the batch scheduler's slots
        ensure_scales(backend, loras, scales)
        stream = backend.create(call.request, params=call.params)
        streams.append(stream)
        state.slot_tasks.begin(stream, call.params, stream_mode=call.stream, chat=stream.result,
                               reasoning_format=call.request.reasoning_format, lora=sorted(lora.items()))
        return stream

    job = state.worker.submit(start, None if call.stream else (lambda s: s.completion()))
    if not call.stream:
        try:
            completion = await run_to_end(job, request)
        except BaseException as exc:
            return exception_response(exc)
        stream = streams[0]
        t = completion.timings
        state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms, t.cache_n)
        if completion.logprobs:
            completion = replace(completion, logprobs=without_stop_entries(
                completion.logprobs, stream.stop_string, state.engine.tokenize))
        return JSONResponse(completion.to_openai(stream.id, state.model_name, stream.created))

    try:
        first = await first_item(job)
    except BaseException as exc:
        return exception_response(exc)
    fingerprint = system_fingerprint()

    def render(chunk: Any) -> Iterable[Any]:
        stream = streams[0]
        yield from chunk.to_openai(stream.id, state.model_name, stream.created, fingerprint=fingerprint,
                                   include_usage=call.include_usage)
        if chunk.timings is not None:
            t = chunk.timings
            state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms, t.cache_n)

    return event_stream(job, first, render)

