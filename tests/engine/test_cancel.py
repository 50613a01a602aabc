"""Cancelling a generation from another thread (the atomic abort flag polled by ggml, in C).

Timing is by events: a cancel is issued once the generating thread has reached the phase under
test; no test asserts on elapsed time.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, LlamaInferenceException, ModelParams, StopReason
from llamact.native.context import Batch

pytestmark = pytest.mark.model

LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 180  # ~1800 tokens: seconds of decode


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=4096, n_batch=2048, n_threads=2)) as eng:
        yield eng


def _when(event: threading.Event, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (event.wait(), action()))
    thread.start()
    return thread


def test_cancel_during_prompt_ends_the_stream_as_cancelled(engine: LlamaEngine) -> None:
    prompt = engine.tokenize(LONG_PROMPT)
    assert len(prompt) > 1000
    stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=8))
    consuming = threading.Event()
    canceller = _when(consuming, engine.cancel)
    consuming.set()  # the cancel lands before or during the prompt's decode: both end it early
    chunks = list(stream)
    canceller.join()
    assert chunks[-1].stop_reason is StopReason.CANCELLED
    assert all(c.token is None for c in chunks)  # nothing was generated
    # the decode stopped early: aborted batches stay in the KV cache, the rest were never decoded
    assert engine.context.memory_seq_pos_max(0) < len(prompt) - 1
    # the engine is usable again, and an uncancelled run of the same prompt completes
    result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=4))
    assert result.stop_reason is StopReason.MAX_TOKENS and len(result.tokens) == 4


def test_cancel_before_the_first_next_cancels_the_requested_generation(engine: LlamaEngine) -> None:
    stream = engine.generate("Once upon a time", GenerationParams(greedy=True, max_tokens=50))
    engine.cancel()  # requested, not started: the stream has not decoded anything yet
    chunks = list(stream)
    assert len(chunks) == 1 and chunks[0].stop_reason is StopReason.CANCELLED and chunks[0].token is None
    assert chunks[0].timings is not None and chunks[0].timings.n_generated == 0
    # consumed by the generation it cancelled: the next one runs to its end
    assert len(engine.complete("Once upon a time", GenerationParams(greedy=True, max_tokens=3)).tokens) == 3


def test_cancel_after_a_generation_ended_does_not_reach_the_next(engine: LlamaEngine) -> None:
    result = engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))
    assert result.stop_reason is StopReason.MAX_TOKENS
    engine.cancel()  # idle again
    stream = engine.generate("Hello", GenerationParams(greedy=True, max_tokens=3))
    assert [c.token is not None for c in stream] == [True, True, True, False]


def test_cancel_between_tokens(engine: LlamaEngine) -> None:
    stream = engine.generate("Once upon a time", GenerationParams(greedy=True, max_tokens=200))
    got = []
    for chunk in stream:
        got.append(chunk)
        if len(got) == 3:
            engine.cancel()
    assert got[-1].stop_reason is StopReason.CANCELLED
    assert got[-1].finish_reason == "stop"
    assert 3 <= sum(c.token is not None for c in got) < 200


def test_cancel_when_idle_does_not_affect_the_next_generation(engine: LlamaEngine) -> None:
    engine.cancel()
    result = engine.complete("Hello", GenerationParams(greedy=True, max_tokens=3))
    assert result.stop_reason is StopReason.MAX_TOKENS


def test_context_decode_aborted_raises(engine: LlamaEngine) -> None:
    ctx = engine.context
    tokens = engine.tokenize(LONG_PROMPT)
    ctx.memory_clear()
    with Batch(ctx, len(tokens)) as batch:
        batch.set_sequence(tokens, 0)
        decoding = threading.Event()
        canceller = _when(decoding, ctx.request_abort)
        decoding.set()
        with pytest.raises(LlamaInferenceException, match="aborted"):
            ctx.decode(batch)
        canceller.join()


def test_an_abort_requested_before_a_decode_aborts_that_decode_once(engine: LlamaEngine) -> None:
    ctx = engine.context
    ctx.memory_clear()
    with Batch(ctx, 4) as batch:
        batch.set_sequence([1, 2, 3], 0)
        ctx.request_abort()
        with pytest.raises(LlamaInferenceException, match="aborted"):
            ctx.decode(batch)
        assert ctx.memory_seq_pos_max(0) == -1  # refused before any work
        ctx.decode(batch)  # the request was consumed
        assert ctx.memory_seq_pos_max(0) == 2
    ctx.memory_clear()
