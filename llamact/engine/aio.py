"""asyncio access to an engine: ``async for chunk in engine.acreate(messages, ...)``.

    stream = engine.acreate(messages, tools=..., params=...)    # the keywords of create()
    async for chunk in stream: ...                              # ChatChunk values
    await stream.aclose()                                       # or leave the loop / cancel the task
    AsyncLlamaEngine(engine)                                    # the same as awaitable methods

Generation runs in a worker thread, one ``next()`` of the ``create()`` stream per awaited chunk, so
the event loop stays free between tokens. When the consumer stops -- ``aclose()``, ``break`` out
of an ``async with`` block, or the awaiting task is cancelled -- the native generation is aborted
(``engine.cancel()``), the worker's step is waited for and the stream closed, so the engine is free
for the next request as soon as ``aclose()`` (or the cancelled await) returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .chat_completion import ChatStream
from .chat_types import ChatChunk, ChatCompletion

if TYPE_CHECKING:
    from .engine import LlamaEngine

__all__ = ["AsyncChatStream", "AsyncLlamaEngine"]

T = TypeVar("T")
_END = object()


class AsyncChatStream:
    """The chunks of one ``create()`` call, for ``async for``; see the module doc."""

    def __init__(self, engine: LlamaEngine, messages: Any, kwargs: dict[str, Any]) -> None:
        self._engine = engine
        self._messages = messages
        self._kwargs = kwargs
        self._stream: ChatStream | None = None
        self._done = False
        # one thread per stream: the ChatStream is only ever touched from it, one step at a time
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamact-acreate")

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
            self._stream = self._engine.create(self._messages, **self._kwargs)
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

    async def _abort(self, pending: asyncio.Future[Any]) -> None:
        """The consumer was cancelled mid-step: stop the native work, let the step return, close."""
        self._engine.cancel()
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
            self._engine.cancel()
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
            self._engine.cancel()  # the stream still holds the engine: its generation is this one
        self._worker.shutdown(wait=False)


class AsyncLlamaEngine:
    """An engine for asyncio code: ``create`` gives an ``AsyncChatStream``; ``create_completion``,
    ``create_structured`` and ``chat_template`` are awaitable (run in a worker thread)."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine = engine

    @classmethod
    async def load(cls, path: Any, params: Any = None) -> AsyncLlamaEngine:
        from .engine import LlamaEngine

        return cls(await asyncio.to_thread(LlamaEngine.load, path, params))

    def create(self, messages: Any, **kwargs: Any) -> AsyncChatStream:
        return AsyncChatStream(self.engine, messages, kwargs)

    async def create_completion(self, messages: Any, **kwargs: Any) -> ChatCompletion:
        async with self.create(messages, **kwargs) as stream:
            return await stream.completion()

    async def create_structured(self, messages: Any, output: Any, **kwargs: Any) -> Any:
        from .structured import response_format_for, validate_output

        reply = await self.create_completion(messages, response_format=response_format_for(output), **kwargs)
        return validate_output(output, reply.content, reply.finish_reason)

    async def chat_template(self, messages: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.engine.chat_template, messages, **kwargs)

    def cancel(self) -> None:
        self.engine.cancel()

    async def close(self) -> None:
        await asyncio.to_thread(self.engine.close)

    async def __aenter__(self) -> AsyncLlamaEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
