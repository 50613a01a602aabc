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
    """A runtime's chat calls for asyncio: ``create()`` streams with ``async for``, the others are
    awaitable. Generation runs in a worker thread; the event loop never waits on a decode.

    Args:
        engine: the runtime to drive (a ``LlamaEngine``, a ``LitertEngine``, a ``BatchScheduler``:
            any ``ChatBackend``). ``AsyncLlamaEngine.load()`` loads one in a worker thread.

    Example:
        ```python
        import asyncio
        from llamact import AsyncLlamaEngine
        from llamact.models import smollm2_path

        async def main() -> None:
            async with await AsyncLlamaEngine.load(smollm2_path(), n_ctx=2048) as engine:
                async for chunk in engine.create([{"role": "user", "content": "Hi!"}], max_tokens=16):
                    print(chunk.content or "", end="")

        asyncio.run(main())
        ```
    """

    def __init__(self, engine: ChatBackend) -> None:
        self.engine = engine

    @classmethod
    async def load(cls, path: Any, params: Any = None, **model_options: Any) -> AsyncLlamaEngine:
        """``LlamaEngine.load()`` in a worker thread.

        Args:
            path: as for ``LlamaEngine.load()``.
            params: as for ``LlamaEngine.load()``.
            **model_options: ``ModelParams`` fields, as for ``LlamaEngine.load()``.

        Raises:
            LlamaException: what ``LlamaEngine.load()`` raises.
        """
        return cls(await asyncio.to_thread(lambda: LlamaEngine.load(path, params, **model_options)))

    def create(self, messages: Any, *, params: GenerationParams | None = None, **options: Any) -> AsyncChatStream:
        """``create()``'s stream for ``async for``: generation runs in a worker thread and stops when the
        consumer stops iterating (``aclose()``, leaving ``async with``, or cancelling the task).

        Args:
            messages: as for ``LlamaEngine.create()``.
            params: as for ``LlamaEngine.create()``.
            **options: as for ``LlamaEngine.create()``.

        Raises:
            LlamaRequestException: a malformed request, from this call itself, before any thread.
            LlamaException: what ``LlamaEngine.create()`` raises, from the stream's first step.
        """
        params, options = chat_keywords(params, options)
        request = as_chat_request(messages, options)
        engine = self.engine
        return AsyncChatStream(lambda: engine.create(request, params=params), engine.cancel)

    async def complete_chat(self, messages: Any, **kwargs: Any) -> ChatCompletion:
        """``create()`` run to its end, awaited: the whole reply.

        Args:
            messages: as for ``LlamaEngine.create()``.
            **kwargs: as for ``LlamaEngine.create()``.

        Raises:
            LlamaException: what ``LlamaEngine.create()`` raises.
        """
        async with self.create(messages, **kwargs) as stream:
            return await stream.completion()

    async def create_structured(self, messages: Any, output: Any, **kwargs: Any) -> Any:
        """``LlamaEngine.create_structured()``, awaited: the reply as an ``output`` value."""
        from .structured import response_format_for, validate_output

        reply = await self.complete_chat(messages, response_format=response_format_for(output), **kwargs)
        return validate_output(output, reply.content, reply.finish_reason)

    async def chat_template(self, messages: Any, **kwargs: Any) -> Any:
        """``LlamaEngine.chat_template()`` in a worker thread."""
        return await asyncio.to_thread(self.engine.chat_template, messages, **kwargs)

    def cancel(self) -> None:
        """Stop the generation in progress (``LlamaEngine.cancel()``)."""
        self.engine.cancel()

    async def close(self) -> None:
        """Close the runtime in a worker thread (``LlamaEngine.close()``)."""
        await asyncio.to_thread(self.engine.close)

    async def __aenter__(self) -> AsyncLlamaEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
