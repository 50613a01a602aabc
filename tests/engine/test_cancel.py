"""Cancelling a generation from another thread (the abort flag polled by ggml, in C)."""

from __future__ import annotations

import threading
import time
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


def _after(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()))
    thread.start()
    return thread


def test_cancel_during_prompt_ends_the_stream_as_cancelled(engine: LlamaEngine) -> None:
    prompt = engine.tokenize(LONG_PROMPT)
    assert len(prompt) > 1000
    stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=8))
    canceller = _after(0.2, engine.cancel)
    chunks = list(stream)
    canceller.join()
    kept = engine.context.memory_seq_pos_max(0)  # the last prompt position the KV cache holds
    assert chunks[-1].stop_reason is StopReason.CANCELLED
    assert all(c.token is None for c in chunks)  # nothing was generated
    # the engine is usable again, and an uncancelled run of the same prompt completes
    result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=4))
    assert result.stop_reason is StopReason.MAX_TOKENS and len(result.tokens) == 4
    assert kept < len(prompt) - 1, "the cancelled decode did not stop early"


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
        canceller = _after(0.2, ctx.request_abort)
        with pytest.raises(LlamaInferenceException, match="aborted"):
            ctx.decode(batch)
        canceller.join()
