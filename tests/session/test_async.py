"""AsyncLlamaEngine(engine).create: chunks in an asyncio loop; a consumer that stops iterating, or a task that is
cancelled, stops the native generation, and the engine serves the next request."""

from __future__ import annotations

import asyncio

import pytest

from llamact import AsyncLlamaEngine, GenerationParams, LlamaEngine, StopReason

pytestmark = pytest.mark.model

LONG = GenerationParams(greedy=True, max_tokens=400)
COUNT = [{"role": "user", "content": "Count from 1 to 500, one number per line."}]


def test_stream_and_collect(engine: LlamaEngine) -> None:
    async def main() -> tuple[str, str]:
        pieces = []
        async for chunk in AsyncLlamaEngine(engine).create([{"role": "user", "content": "Hi"}],
                                                           params=GenerationParams(greedy=True, max_tokens=6)):
            pieces.append(chunk.content or "")
        reply = await AsyncLlamaEngine(engine).complete_chat([{"role": "user", "content": "Hi"}],
                                                                 params=GenerationParams(greedy=True, max_tokens=6))
        return "".join(pieces), reply.content

    streamed, collected = asyncio.run(main())
    assert streamed and streamed == collected


def test_leaving_the_loop_stops_generation(engine: LlamaEngine) -> None:
    async def main() -> int:
        n = 0
        async with AsyncLlamaEngine(engine).create(COUNT, params=LONG) as stream:
            async for _ in stream:
                n += 1
                if n == 3:
                    break
        assert stream.stream is not None and stream.stream.finish_reason is None  # ended by us, mid-way
        return n

    assert asyncio.run(main()) == 3
    generated = len(engine.context_tokens) - len(engine.tokenize(engine.chat_template(COUNT).prompt))
    assert generated < 50  # far from max_tokens: generation stopped with the consumer
    after = engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))  # the engine is free
    assert after.stop_reason in (StopReason.MAX_TOKENS, StopReason.EOG)


def test_cancelling_the_task_cancels_the_native_generation(engine: LlamaEngine) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def consume() -> None:
            async for _ in AsyncLlamaEngine(engine).create(COUNT, params=LONG):
                started.set()

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    generated = len(engine.context_tokens) - len(engine.tokenize(engine.chat_template(COUNT).prompt))
    assert generated < 50  # the native generation ended with the task, far from max_tokens
    after = engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))  # the engine is free
    assert after.stop_reason in (StopReason.MAX_TOKENS, StopReason.EOG)
