"""``POST /v1/messages`` (Anthropic's Messages API) and ``POST /v1/messages/count_tokens``, as
llama-server answers them: the body becomes a chat request (``server.anthropic_api``), runs on the
chat path, and is answered as a ``message`` or streamed as Anthropic's events
(``server.anthropic_stream``). Errors keep llama-server's OpenAI shape, as it does on these routes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..anthropic_api import message_json, read_messages
from ..anthropic_stream import ANTHROPIC_FRAMING, AnthropicEvents
from ..protocol import exception_response, refuse_unenforced_schema
from ..sse import event_stream, first_item, run_to_end
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read_messages, state.defaults)
        refuse_unenforced_schema(call.request, state.defaults)
    except Exception as exc:
        return exception_response(exc)
    streams: list[Any] = []

    def start(backend: Any) -> Any:   # on the worker: an engine, or the batch scheduler's slots
        stream = backend.create(call.request, params=call.params)
        streams.append(stream)
        return stream

    def record(timings: Any) -> None:
        state.metrics.record(timings.prompt_n, timings.prompt_ms, timings.predicted_n, timings.predicted_ms,
                             timings.cache_n)

    job = state.worker.submit(start, None if call.stream else (lambda s: s.completion()))
    if not call.stream:
        try:
            completion = await run_to_end(job, request)
        except BaseException as exc:
            return exception_response(exc)
        record(completion.timings)
        stream = streams[0]
        return JSONResponse(message_json(completion, stream.id, state.model_name, stream.stop_string))

    try:
        first = await first_item(job)
    except BaseException as exc:
        return exception_response(exc)
    renderer: list[AnthropicEvents] = []

    def render(chunk: Any) -> Iterable[Any]:
        if not renderer:
            renderer.append(AnthropicEvents(streams[0], state.model_name))
        yield from renderer[0].render(chunk)
        if chunk.timings is not None:
            record(chunk.timings)

    return event_stream(job, first, render, ANTHROPIC_FRAMING)


def _count(engine: Any, call: Any) -> int:
    """llama-server's count: the rendered prompt tokenized with special tokens added and parsed."""
    prompt = engine.chat_template(call.request).prompt
    return len(engine.tokenize(prompt, add_special=True, parse_special=True))


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read_messages, state.defaults)
        n_tokens = await asyncio.to_thread(_count, state.engine, call)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"input_tokens": n_tokens})
