"""An HTTP request carried between processes, run through an ASGI app in process, and its answer sent
back: what lets a Ray replica serve ``llamact serve``'s own app (every route, every byte of its wire
format) behind an ingress that only forwards.

    parts = await RequestParts.read(request)           # the ingress: a starlette Request, body read once
    async for messages in call_app(app, parts): ...    # the replica: the app's ASGI messages, in batches
    return ForwardedResponse(batches)                  # the ingress: those messages, sent as they come

``call_app`` gives the app the request's scope and body, then an ``http.disconnect`` once the caller
stops reading (a client that went away: the app cancels its job as it does behind uvicorn). The
messages the app sent meanwhile are yielded together, so a stream costs one hand-over per batch of
events, not one per token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["ForwardedResponse", "RequestParts", "call_app"]

Message = dict[str, Any]
_DONE: Message = {"type": "llamact.done"}


@dataclass(frozen=True)
class RequestParts:
    """What the app needs of an HTTP request (plain values: it crosses processes)."""

    method: str
    path: str
    query_string: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    client: tuple[str, int] | None = None

    @classmethod
    async def read(cls, request: Request, limit: int) -> RequestParts:
        """The request, its body cut after ``limit`` bytes (the app refuses a body that long by its
        own rules: the Content-Length, or the bytes it counts)."""
        scope = request.scope
        client = scope.get("client")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) >= limit:
                del body[limit:]
                break
        return cls(scope["method"], scope["path"], scope.get("query_string", b""),
                   tuple((bytes(k), bytes(v)) for k, v in scope.get("headers", ())), bytes(body),
                   (str(client[0]), int(client[1])) if client else None)

    def scope(self) -> dict[str, Any]:
        return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                "method": self.method, "scheme": "http", "path": self.path, "raw_path": self.path.encode(),
                "root_path": "", "query_string": self.query_string, "headers": list(self.headers),
                "client": self.client, "server": ("127.0.0.1", 0), "state": {}}


async def call_app(app: Any, parts: RequestParts) -> AsyncIterator[list[Message]]:
    """Run ``parts`` through ``app``; yield what it sends, in batches (see the module docstring)."""
    out: asyncio.Queue[Message] = asyncio.Queue()
    gone = asyncio.Event()
    body_given = False

    async def receive() -> Message:
        nonlocal body_given
        if not body_given:
            body_given = True
            return {"type": "http.request", "body": parts.body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await out.put(message)

    async def run() -> None:
        try:
            await app(parts.scope(), receive, send)
        finally:
            await out.put(_DONE)

    task = asyncio.create_task(run())
    try:
        while True:
            batch = [await out.get()]
            while not out.empty():
                batch.append(out.get_nowait())
            done = batch[-1] is _DONE
            messages = [m for m in batch if m is not _DONE]
            if messages:
                yield messages
            if done:
                break
        await task   # the app's own failure, if any
    finally:
        gone.set()   # the caller stopped reading: the app sees its client leave
        if not task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            task.cancel()


class ForwardedResponse(Response):
    """A response whose ASGI messages come from ``batches`` (a replica's ``call_app``, through Ray's
    response generator: any async iterable of message lists), sent as they come."""

    def __init__(self, batches: Any) -> None:
        self._batches = batches

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = ended = False
        try:
            async for batch in self._batches:
                for message in batch:
                    started = started or message.get("type") == "http.response.start"
                    await send(message)
            ended = True
        finally:
            cancel = getattr(self._batches, "cancel", None)
            if not ended and cancel is not None:   # the client went away: the replica's request stops
                cancel()
        if not started:   # the replica ended without an answer
            await Response("the replica gave no answer", status_code=502)(scope, receive, send)
