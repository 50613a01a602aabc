"""The chat path: a chat request run on its model's worker, streamed or answered whole, for every
family whose body is a chat request (chat, Responses, Anthropic's Messages).

    return await answer_chat(request, call, whole, render, lora=lora)     # the chat path, for any wire shape

``answer_chat`` is the chat path itself -- the schema check, the worker, the metrics, the stream or
the whole reply -- with the wire shape left to the route: the chat route writes OpenAI's chat shape,
the Responses route (``responses``) its own from the same completion and chunks. Tools the model's
template cannot carry are refused or warned about here, for every wire shape (``serving.tool_policy``),
and a reply the parser could not read (answered all the same, docs/design.md deviation 17) is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from ...engine import ChatBackend
from ...engine.chat_completion import ChatStream
from ...json_types import Json
from ..http.errors import exception_response
from ..http.sse import OPENAI_FRAMING, Framing, event_stream, first_item, run_to_end
from ..models.gateway_metrics import adapter_names
from ..models.state import state_of
from ..wire.request import ChatCall, refuse_unenforced_schema
from .lora import request_scales
from .placement import placement
from .tool_policy import WARNING_HEADER, tool_policy

__all__ = ["answer_chat"]


async def answer_chat(request: Request, call: ChatCall, whole: Callable[[Any, Any], Json],
                      render: Callable[[Any, Any], Iterable[Json]], *, framing: Framing = OPENAI_FRAMING,
                      lora: dict[int, float] | None = None) -> Response:
    """Run ``call`` on the server's worker. Not streamed: ``whole(completion, stream)`` is the JSON
    answer; streamed: ``render(chunk, stream)`` gives each chunk's events, written as ``framing``
    says (``http.sse.event_stream``). Errors before the first event are HTTP errors.
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

    def start(backend: ChatBackend) -> ChatStream:   # on the worker: an engine, or the batch scheduler's slots
        stream = backend.create(call.request, params=call.params, **placement(backend, loras, scales, call.id_slot))
        streams.append(stream)
        state.slot_tasks.begin(stream, call.params, stream_mode=call.stream, chat=stream.result,
                               reasoning_format=call.request.reasoning_format, lora=sorted(lora.items()),
                               n_prompt=stream.n_prompt)
        return stream

    job = state.worker.submit(start, None if call.stream else (lambda s: s.completion()))
    state.metrics.adapters.note(job, adapter_names(loras, scales))
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
