"""A chat stream for asyncio: ``async for chunk in AsyncLlamaEngine(engine).create(messages, ...)``.

    stream = AsyncLlamaEngine(engine).create(messages, tools=..., params=...)   # create()'s arguments
    async for chunk in stream: ...                              # ChatChunk values
    await stream.aclose()                                       # or leave the loop / cancel the task

``AsyncChatStream(start, cancel)`` runs ``start()`` (a ``ChatStream``, e.g. ``engine.create(...)``)
in its worker thread on the first chunk; stopping it interrupts that stream (``cancel()``, the
runtime's, while the stream is still being made). The awaitable engine is
``llamact.engine.async_engine``.

Generation runs in a worker thread, one ``next()`` of the ``create()`` stream per awaited chunk, so
the event loop stays free between tokens. When the consumer stops -- ``aclose()``, ``break`` out
of an ``async with`` block, or the awaiting task is cancelled -- the generation is interrupted
(``ChatStream.interrupt()``), the worker's step is waited for and the stream closed, so the engine is free
for the next request as soon as ``aclose()`` (or the cancelled await) returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

from .chat_completion import ChatStream
from .chat_types import ChatChunk, ChatCompletion

__all__ = ["AsyncChatStream"]

T = TypeVar("T")
_END = object()


class AsyncChatStream:
    """The chunks of one ``create()`` call, for ``async for``; see the module doc."""

    def __init__(self, start: Callable[[], ChatStream], cancel: Callable[[], None]) -> None:
        self._start = start
        self._cancel = cancel
        self._stream: ChatStream | None = None
        self._done = False
        # one thread per stream: the ChatStream is only ever touched from it, one step at a time
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamact-async")

    @property
    def stream(self) -> ChatStream | None:
        """The underlying ``create()`` stream (None before the first chunk was requested)."""
        return self._stream

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def _run(self, fn: Callable[[], T]) -> T:
        future = asyncio.get_running_loop().run_in_executor(self._worker, fn)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await self._abort(future)
            raise

    def _step(self) -> Any:
        if self._stream is None:
            self._stream = self._start()
        return next(self._stream, _END)

    async def __anext__(self) -> ChatChunk:
        if self._done:
            raise StopAsyncIteration
        try:
            chunk = await self._run(self._step)
        except BaseException:
            await self.aclose()
            raise
        if chunk is _END:
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    def _interrupt(self) -> None:
        stream = self._stream
        if stream is not None:
            stream.interrupt()
        else:   # still being made: the runtime's own cancel
            self._cancel()

    async def _abort(self, pending: asyncio.Future[Any]) -> None:
        """The consumer was cancelled mid-step: stop the native work, let the step return, close."""
        self._interrupt()
        try:
            await pending
        except BaseException:
            pass
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the generation (if it is still running) and release the engine."""
        if self._done:
            return
        self._done = True
        stream = self._stream
        if stream is not None and stream.finish_reason is None:
            stream.interrupt()
        loop = asyncio.get_running_loop()
        if stream is not None:
            await loop.run_in_executor(self._worker, stream.close)
        self._worker.shutdown(wait=False)

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def completion(self) -> ChatCompletion:
        """Run the stream to its end and return the whole reply."""
        async for _ in self:
            pass
        if self._stream is None:
            raise StopAsyncIteration
        return self._stream.completion()

    def __del__(self) -> None:
        if not self._done and self._stream is not None and self._stream.finish_reason is None:
            self._stream.interrupt()  # the stream still holds the engine: its generation is this one
        self._worker.shutdown(wait=False)
