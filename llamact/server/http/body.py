"""A request's JSON body, read within the server's limits, or the request error that refuses it.

    body = await json_body(request)       # RequestError (400 / 413 / 415) for a body the server refuses
    call = await json_body(request, read_chat, defaults)   # and read by read_chat(body, defaults)

A body is read once per request: the JSON is kept in the request's scope (``logs.BODY_KEY``), where
router mode's dispatch (which reads ``model`` first), a second reading and ``--log-prompts`` find it.

What enters: a POST request; what is checked, in order, each before the next costs anything: the
media type (``application/json``, charset parameters allowed: a browser's cross-site "simple
request" -- text/plain, a form -- cannot start a generation), the size (``Content-Length`` first,
then the bytes counted as they arrive: an oversized body is never buffered whole), the nesting
depth (a scan of the raw bytes, so that neither ``json.loads`` nor the code after it recurses
without bound), then the JSON itself, then the route's reader (``read_chat`` and the like: a
30 MB chat body takes it seconds). For a large body all that runs on a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from fastapi import Request
from starlette.requests import ClientDisconnect

from ..config.settings import ServerSettings
from .errors import RequestError
from .logs import BODY_KEY

__all__ = ["json_body", "nesting_depth", "server_settings"]

OFF_LOOP_BYTES = 1 << 20   # bodies above this are scanned and decoded on a thread
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)   # a JSON string (brackets inside do not count)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DELTA = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")   # open +1, close -1 (as signed bytes)


def nesting_depth(raw: bytes) -> int:
    """The deepest bracket nesting of a JSON text, strings left out (C-speed passes over the bytes)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET).translate(_DELTA)
    return max(accumulate(memoryview(brackets).cast("b")), default=0)


def _check_media_type(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        shown = f"'{media_type}'" if media_type else "none"
        raise RequestError(f"the request body must be JSON sent with 'Content-Type: application/json' (this request "
                           f"has {shown}; with curl: -H 'Content-Type: application/json')", status=415)


async def _read(request: Request, limit: int) -> bytes:
    too_large = f"the request body is larger than the server's limit of {limit} bytes (--max-body-size)"
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise RequestError(f"the Content-Length header is not a number: {length[:40]!r}")
        if int(length) > limit:
            raise RequestError(too_large, status=413)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(too_large, status=413)
            chunks.append(chunk)
    except ClientDisconnect:   # nobody reads the answer; the route just ends
        raise RequestError("the client went away before sending the whole body") from None
    return b"".join(chunks)


def _decode(raw: bytes, max_depth: int) -> Any:
    if nesting_depth(raw) > max_depth:
        raise RequestError(f"the request body is nested more than {max_depth} levels deep (--max-body-depth)")
    try:
        return json.loads(raw)
    except RecursionError:   # unreachable after the scan, kept as the guard it replaces
        raise RequestError("the request body is nested too deeply") from None
    except ValueError as exc:   # bad JSON, or bytes that are not UTF-8/16/32
        raise RequestError(f"the request body is not valid JSON: {exc}") from None


_SIZE_KEY = "llamact.body_size"


def server_settings(request: Request) -> ServerSettings:
    """The server's own settings (its limits, its edge): the app's model router holds them."""
    settings: ServerSettings = request.app.state.llamact.settings
    return settings


async def json_body(request: Request, read: Callable[..., Any] | None = None, *args: Any) -> Any:
    """The body's JSON, or ``read(json, *args)`` when a reader is given."""
    scope = request.scope
    if BODY_KEY in scope:
        body = scope[BODY_KEY]
        if read is None:
            return body
        return await asyncio.to_thread(read, body, *args) if scope[_SIZE_KEY] > OFF_LOOP_BYTES else read(body, *args)
    settings = server_settings(request)
    _check_media_type(request)
    raw = await _read(request, settings.max_body_size)

    def work() -> Any:
        body = _decode(raw, settings.max_body_depth)
        scope[BODY_KEY], scope[_SIZE_KEY] = body, len(raw)
        return body if read is None else read(body, *args)

    return await asyncio.to_thread(work) if len(raw) > OFF_LOOP_BYTES else work()
