"""``POST /v1/chat/completions``: a chat request on the engine, streamed as llama-server streams it
(``ChatChunk.to_openai`` events) or answered whole (``ChatCompletion.to_openai``).

    return await answer_chat(request, call, whole, render, lora=lora)     # the chat path, for any wire shape

``answer_chat`` is the chat path itself -- the schema check, the worker, the metrics, the stream or
the whole reply -- with the wire shape left to the route: this route writes OpenAI's chat shape, the
Responses route (``.responses``) its own from the same completion and chunks. Tools the model's
template cannot carry are refused or warned about here, for every wire shape (``server.tool_policy``),
and a reply the parser could not read (answered all the same, docs/design.md deviation 17) is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...engine.chat_types import system_fingerprint
from ..lora_control import ensure_scales, request_scales, with_lora
from ..protocol import ChatCall, exception_response, read_chat, refuse_unenforced_schema, without_stop_entries
from ..sse import OPENAI_FRAMING, Framing, event_stream, first_item, run_to_end
from ..state import state_of
from ..tool_policy import WARNING_HEADER, tool_policy
from .body import json_body

__all__ = ["answer_chat", "router"]

Json = Any
router = APIRouter()


async def answer_chat(request: Request, call: ChatCall, whole: Callable[[Any, Any], Json],
                      render: Callable[[Any, Any], Iterable[Json]], *, framing: Framing = OPENAI_FRAMING,
                      lora: dict[int, float] | None = None) -> Response:
    """Run ``call`` on the server's worker. Not streamed: ``whole(completion, stream)`` is the JSON
    answer; streamed: ``render(chunk, stream)`` gives each chunk's events, written as ``framing``
    says (``sse.event_stream``). Errors before the first event are HTTP errors.
    ``lora``: the request's adapter scales (its ``lora`` field; none: the server's)."""
    state = state_of(request)
    try:
        refuse_unenforced_schema(call.request, state.defaults)
        warning = tool_policy(call.request, state)
    except Exception as exc:
        return exception_response(exc)
    headers = {WARNING_HEADER: warning} if warning else None
    streams: list[Any] = []
    lora = lora or {}
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
        t = completion.timings
        state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms, t.cache_n)
        _log_recovery(state, completion.recovery)
        return JSONResponse(whole(completion, streams[0]), headers=headers)

    try:
        first = await first_item(job)
    except BaseException as exc:
        return exception_response(exc)

    def events(chunk: Any) -> Iterable[Any]:
        yield from render(chunk, streams[0])
        if chunk.timings is not None:
            t = chunk.timings
            state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms, t.cache_n)
            _log_recovery(state, chunk.recovery)

    response = event_stream(job, first, events, framing)
    if warning:
        response.headers[WARNING_HEADER] = warning
    return response


def _log_recovery(state: Any, recovery: Any) -> None:
    """A reply whose final parse failed (docs/design.md deviation 17: answered all the same) is logged."""
    log = getattr(state, "log", None)
    if recovery is None or recovery.parse_error is None or log is None:
        return
    rules = ", ".join(recovery.recovered) or "none"
    log.warning(f"model {state.model_name}: the parser could not read a reply ({recovery.parse_error}); answered "
                f"with what could be read, the rest as content (recovered by: {rules})",
                model=state.model_name, parse_error=recovery.parse_error, recovered=list(recovery.recovered))


@router.post("/v1/chat/completions")
@router.post("/chat/completions")
async def chat_completions(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_chat), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    fingerprint = system_fingerprint()

    def whole(completion: Any, stream: Any) -> Json:
        if completion.logprobs:
            completion = replace(completion, logprobs=without_stop_entries(
                completion.logprobs, stream.stop_string, state.engine.tokenize))
        return completion.to_openai(stream.id, state.model_name, stream.created)

    def render(chunk: Any, stream: Any) -> Iterable[Json]:
        return chunk.to_openai(stream.id, state.model_name, stream.created, fingerprint=fingerprint,
                               include_usage=call.include_usage)

    return await answer_chat(request, call, whole, render, lora=lora)
