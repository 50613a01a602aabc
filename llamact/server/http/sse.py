"""How a job's items reach an HTTP client: server-sent events for a stream, or a run to the end.

    first = await first_item(job)                          # errors raised here become HTTP errors
    return event_stream(job, first, render)                # data: {...} events, then data: [DONE]
    return event_stream(job, first, render, ANTHROPIC_FRAMING)   # a route's own framing (messages.stream)
    result = await run_to_end(job, request, on_item)       # a reply not streamed

What enters: a ``Job`` (``runners.job``) and, for a stream, a ``render(item)`` that gives the JSON
events of one item. What leaves: llama-server's event stream -- ``data: <json>`` per event, ``data:
[DONE]`` at the end, or an error event (``{"error": ...}``, ``server_error``) when the stream fails
after its first event (``OPENAI_FRAMING``; a route with another framing passes its ``Framing``: the
Anthropic route writes ``event:`` lines and no ``[DONE]``). A client that goes away cancels its job
(streamed: when the response is dropped; not streamed: noticed within ``DISCONNECT_POLL_S``), which
frees its slot.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import StreamingResponse

from ...errors import LlamaException
from ...json_types import Json
from ..runners.job import Job
from .errors import SERVER_ERROR, RequestError, error_answer, error_body

log = logging.getLogger("llamact.server")

__all__ = ["DISCONNECT_POLL_S", "NATIVE_FRAMING", "OPENAI_FRAMING", "RESPONSES_FRAMING", "First", "Framing",
           "event_stream", "first_item", "named_sse", "run_to_end", "sse"]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DISCONNECT_POLL_S = 0.25   # how often a non-streamed request checks that its client is still there
DONE = b"data: [DONE]\n\n"


def sse(data: Json) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


class Framing(NamedTuple):
    """How a route's events are written: ``event(item)`` one rendered event, ``error(object)`` the error
    object (``code``, ``message``, ``type``) that ends a failed stream, ``done`` the last bytes."""

    event: Callable[[Any], bytes]
    error: Callable[[Json], bytes]
    done: bytes


def named_sse(event: Json) -> bytes:
    """``{"event": NAME, "data": ...}`` as llama-server writes a named event (format_oai_resp_sse)."""
    return f"event: {event['event']}\n".encode() + sse(event["data"])


# llama-server's OpenAI routes: data lines, an {"error": ...} event, then [DONE]
OPENAI_FRAMING = Framing(sse, lambda error: sse({"error": error}), DONE)
# its Responses stream: named events, the error as a data line, and no [DONE]
RESPONSES_FRAMING = Framing(named_sse, lambda error: sse({"error": error}), b"")
# its own completion routes (/completion, /infill): data lines, and no [DONE]
NATIVE_FRAMING = Framing(sse, lambda error: sse({"error": error}), b"")


async def run_to_end(job: Job, request: Request, on_item: Callable[[Any], None] | None = None) -> Any:
    """Run a job to its end (a reply not streamed), passing its items to ``on_item``; returns its
    result. A client that goes away meanwhile cancels it, as a streaming client does."""
    if on_item is None:
        job.wants_items = False

    async def consume() -> Any:
        async for item in job:
            if on_item is not None:
                on_item(item)
        return job.result

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)

    answer, gone = asyncio.ensure_future(consume()), asyncio.ensure_future(watch())
    try:
        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not answer.done():   # the client went away, or this handler was cancelled
            job.cancel()
            answer.cancel()
    if not answer.done():   # the client went away: its slot is freed, the answer goes nowhere
        raise RequestError("the client went away before the reply was ready", status=499)
    return answer.result()


class First:
    """A stream's first item (``has_item`` False when it ended without any) and the rest of its items."""

    def __init__(self, has_item: bool, item: Any, rest: AsyncIterator[Any]) -> None:
        self.has_item = has_item
        self.item = item
        self.rest = rest


async def first_item(job: Job) -> First:
    """Wait for the job's first item; its errors are raised here, before any event is sent, so that they
    become HTTP errors."""
    items = aiter(job)
    try:
        return First(True, await items.__anext__(), items)
    except StopAsyncIteration:
        return First(False, None, items)
    except BaseException:
        job.cancel()
        raise


Render = Callable[[Any], Iterable[Json]]


def event_stream(job: Job, first: First, render: Render, framing: Framing = OPENAI_FRAMING, *,
                 more: Iterable[Callable[[], tuple[Job, Render]]] = (),
                 between: Iterable[Json] = ()) -> StreamingResponse:
    """The job's items as server-sent events, ``render(item)`` giving each item's events, written by
    ``framing`` (llama-server's OpenAI framing unless a route has its own). ``more``: the next jobs of
    the request (several prompts), each started when the one before has ended, its events after
    ``between``'s."""

    async def events() -> AsyncIterator[bytes]:
        finished = False
        current = job
        try:
            if first.has_item:
                for data in render(first.item):
                    yield framing.event(data)
                async for item in first.rest:
                    for data in render(item):
                        yield framing.event(data)
            for start_next in more:
                current, render_next = start_next()
                items = aiter(current)
                try:   # a prompt refused before its first item has no `between` events (upstream's order)
                    item = await items.__anext__()
                except StopAsyncIteration:
                    continue
                for data in between:
                    yield framing.event(data)
                for data in render_next(item):
                    yield framing.event(data)
                async for item in items:
                    for data in render_next(item):
                        yield framing.event(data)
            finished = True
            if framing.done:
                yield framing.done
        except RequestError as exc:   # the server stopped it (shutting down), or a later prompt is refused
            finished = True
            code, error_type = error_answer(exc)
            yield framing.error(error_body(str(exc), error_type, code)["error"])
        except Exception as exc:   # after the first event: the stream ends with an error event
            finished = True
            if not isinstance(exc, LlamaException):
                log.exception("a stream failed", exc_info=exc)
            code, error_type = SERVER_ERROR   # whatever its kind: the answer has begun (llama-server's way)
            yield framing.error(error_body(str(exc) if isinstance(exc, LlamaException) else
                                           f"{type(exc).__name__}: {exc}", error_type, code)["error"])
        finally:
            if not finished:   # the client went away: free the slot
                current.cancel()

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
