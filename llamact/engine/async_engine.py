"""An engine for asyncio code: ``AsyncLlamaEngine(engine)``, the engine's chat methods awaitable.

    async with await AsyncLlamaEngine.load(path, params) as engine:
        async for chunk in engine.create(messages, ...): ...       # an AsyncChatStream
        reply = await engine.complete_chat(messages, ...)

What enters: a ``LlamaEngine`` (or a path to load one in a worker thread). ``create`` gives an
``AsyncChatStream`` (``llamact.engine.aio``); ``complete_chat``, ``create_structured`` and
``chat_template`` run in a worker thread; they take what the engine's methods take and raise what
they raise.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from .aio import AsyncChatStream
from .chat_types import ChatCompletion
from .engine import LlamaEngine

__all__ = ["AsyncLlamaEngine"]


class AsyncLlamaEngine:
    """See the module docstring."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine = engine

    @classmethod
    async def load(cls, path: Any, params: Any = None, **model_options: Any) -> AsyncLlamaEngine:
        """``LlamaEngine.load`` on a thread (keywords: ModelParams fields)."""
        return cls(await asyncio.to_thread(lambda: LlamaEngine.load(path, params, **model_options)))

    def create(self, messages: Any, **kwargs: Any) -> AsyncChatStream:
        return self.engine.acreate(messages, **kwargs)

    async def complete_chat(self, messages: Any, **kwargs: Any) -> ChatCompletion:
        async with self.create(messages, **kwargs) as stream:
            return await stream.completion()

    async def create_completion(self, messages: Any, **kwargs: Any) -> ChatCompletion:
        """Deprecated (0.2 removes it): ``complete_chat()``."""
        warnings.warn("AsyncLlamaEngine.create_completion() is now complete_chat()", DeprecationWarning, stacklevel=2)
        return await self.complete_chat(messages, **kwargs)

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
