"""Any runtime for asyncio code: ``AsyncLlamaEngine(engine)``, the chat calls awaitable.

    async with await AsyncLlamaEngine.load(path, params) as engine:
        async for chunk in engine.create(messages, ...): ...       # an AsyncChatStream
        reply = await engine.complete_chat(messages, ...)

What enters: a runtime (``backend.ChatBackend``: a ``LlamaEngine``, a ``LitertEngine``, a
``BatchScheduler``), or a path to load one in a worker thread. ``create`` gives an
``AsyncChatStream`` (``llamact.engine.aio``); ``complete_chat``, ``create_structured`` and
``chat_template`` run in a worker thread; they take what the runtime's methods of the same names
take and raise what they raise (a bad request raises from ``create`` itself, before any thread).
This is the one asyncio face: the sync engines have no ``a``-prefixed variants.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..chat.request import as_chat_request
from .aio import AsyncChatStream
from .backend import ChatBackend
from .chat_calls import chat_keywords
from .chat_types import ChatCompletion
from .engine import LlamaEngine
from .params import GenerationParams

__all__ = ["AsyncLlamaEngine"]


class AsyncLlamaEngine:
    """See the module docstring."""

    def __init__(self, engine: ChatBackend) -> None:
        self.engine = engine

    @classmethod
    async def load(cls, path: Any, params: Any = None, **model_options: Any) -> AsyncLlamaEngine:
        """``LlamaEngine.load`` on a thread (keywords: ModelParams fields)."""
        return cls(await asyncio.to_thread(lambda: LlamaEngine.load(path, params, **model_options)))

    def create(self, messages: Any, *, params: GenerationParams | None = None, **options: Any) -> AsyncChatStream:
        """``create()``'s stream for ``async for``: generation runs in a worker thread and stops when the
        consumer stops iterating (``aclose()``, leaving ``async with``, or cancelling the task)."""
        params, options = chat_keywords(params, options)
        request = as_chat_request(messages, options)
        engine = self.engine
        return AsyncChatStream(lambda: engine.create(request, params=params), engine.cancel)

    async def complete_chat(self, messages: Any, **kwargs: Any) -> ChatCompletion:
        async with self.create(messages, **kwargs) as stream:
            return await stream.completion()

    async def create_structured(self, messages: Any, output: Any, **kwargs: Any) -> Any:
        from .structured import response_format_for, validate_output

        reply = await self.complete_chat(messages, response_format=response_format_for(output), **kwargs)
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
