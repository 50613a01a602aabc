"""The prompt cache (llama-server's cache_prompt): consecutive generations reuse the KV cache for the
prompt's prefix in common with what the context holds, and evaluate only the rest.

What is checked:
- the record (``engine.context_tokens``) equals what the KV cache holds after every generation,
  however it ended: finished, closed early, stopped by max_tokens, cancelled mid-prompt, full
  context, refused before it started;
- the reuse is the longest common prefix, at most the prompt less one token, and it is reported
  (``usage.prompt_tokens_details.cached_tokens``, ``timings.cache_n``, ``prompt_n`` the rest);
- greedy output with the cache equals the output without it, over a multi-turn chat with an edit
  in the middle of the history, on both bundled models.

Logits depend (slightly) on how llama.cpp batches tokens: its CPU kernels take other paths for one
row than for many (flash attention, repacked Q4_K matrices, matrix-matrix vs matrix-vector
products), so the KV cache of a reply decoded token by token is not bit-identical to the same
tokens evaluated in one batch as part of the next prompt -- with or without a cache, in
llama-server too (measured on SmolLM2 by raw decodes, no cache involved: logits move by up to
0.7; a greedy reply then can differ). The equality tests therefore decode one token per ubatch
(``n_ubatch=1``), where both ways compute exactly the same thing and any difference is the cache's
fault, or compare runs whose ubatches are laid out alike.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llamact import (
    GenerationParams,
    LlamaEngine,
    LlamaException,
    LlamaInferenceException,
    LlamaStateException,
    ModelParams,
    StopReason,
)
from llamact.engine.generator import GenerationChunk
from llamact.engine.prompt_cache import PromptCache, common_prefix
from llamact.native.context import Batch, Context, ContextOptions

GREEDY = GenerationParams(greedy=True, max_tokens=16)
UNCACHED = GenerationParams(greedy=True, max_tokens=16, cache_prompt=False)


# -- the record, on a stand-in context --------------------------------------------------------------


class FakeContext:
    """The three memory calls PromptCache makes, over a list of held positions."""

    def __init__(self, can_keep: bool = True) -> None:
        self.held = 0
        self.can_keep = can_keep
        self.closed = False

    def keep_prefix(self, n_keep: int) -> bool:
        if n_keep <= 0 or not self.can_keep or n_keep > self.held:
            self.held = 0
            return n_keep == 0
        self.held = n_keep
        return True

    def memory_seq_pos_max(self, seq_id: int = 0) -> int:
        if self.closed:
            raise LlamaStateException("closed")
        return self.held - 1

    def memory_clear(self, data: bool = True) -> None:
        self.held = 0


def _cache(context: FakeContext) -> PromptCache:
    return PromptCache(context)  # type: ignore[arg-type]


def _run(cache: PromptCache, context: FakeContext, prompt: list[int], n_cached: int, generated: list[int],
         decoded: int) -> None:
    """One generation: ``generated`` tokens yielded, the context holding ``decoded`` positions after."""
    def chunks() -> Iterator[GenerationChunk]:
        for token in generated:
            yield GenerationChunk("", token)
        context.held = decoded
        yield GenerationChunk("", None, StopReason.MAX_TOKENS)

    list(cache.track(chunks(), prompt[n_cached:]))


def test_common_prefix() -> None:
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([1, 2, 3], [1, 2]) == 2


def test_reuse_keeps_the_common_prefix_and_evaluates_at_least_one_token() -> None:
    context = FakeContext()
    cache = _cache(context)
    assert cache.reuse([1, 2, 3]) == 0
    _run(cache, context, [1, 2, 3], 0, [7, 8], decoded=4)  # 8 was sampled, never decoded
    assert cache.tokens == (1, 2, 3, 7)
    assert cache.reuse([1, 2, 3, 7, 9]) == 4
    assert cache.tokens == (1, 2, 3, 7)
    assert cache.reuse([1, 2, 5]) == 2 and context.held == 2 and cache.tokens == (1, 2)
    assert cache.reuse([1, 2]) == 1 and context.held == 1  # all cached: the last token is evaluated again
    assert cache.reuse([]) == 0 and cache.tokens == (1,)  # refused later by the generation: nothing changes


def test_reuse_off_or_refused_by_the_memory_starts_from_scratch() -> None:
    context = FakeContext()
    cache = _cache(context)
    cache.reuse([1, 2, 3])
    _run(cache, context, [1, 2, 3], 0, [4], decoded=3)
    assert cache.reuse([1, 2, 3, 4], enabled=False) == 0 and context.held == 0 and cache.tokens == ()
    _run(cache, context, [1, 2, 3, 4], 0, [5], decoded=4)
    context.can_keep = False  # a recurrent state cannot be cut back
    assert cache.reuse([1, 2, 3, 4, 5]) == 0 and context.held == 0 and cache.tokens == ()


def test_the_record_follows_the_memory_however_the_generation_ends() -> None:
    context = FakeContext()
    cache = _cache(context)
    cache.reuse([1, 2, 3])

    def failing() -> Iterator[GenerationChunk]:
        yield GenerationChunk("", 4)
        context.held = 2  # a decode failed: llama.cpp removed its batch from the memory
        raise LlamaInferenceException("decode failed")

    with pytest.raises(LlamaInferenceException):
        list(cache.track(failing(), [1, 2, 3]))
    assert cache.tokens == (1, 2)

    stream = cache.track(iter([GenerationChunk("", 5), GenerationChunk("", 6)]), [])
    next(stream)
    context.held = 2
    stream.close()  # closed early
    assert cache.tokens == (1, 2)

    context.held = 9  # more than recorded: changed behind the cache's back; not trusted
    cache.sync()
    assert cache.tokens == () and context.held == 0

    context.held = 3
    cache.track(iter([]), [1, 2, 3]).close()  # never started: nothing recorded, nothing to sync
    assert cache.tokens == ()
    list(cache.track(iter([]), [1, 2, 3]))
    assert cache.tokens == (1, 2, 3)
    context.closed = True  # the engine closed under the generation: nothing is held any more
    cache.sync()
    assert cache.tokens == ()


# -- on the bundled models -------------------------------------------------------------------------

HISTORY = [
    "Hi! What is the capital of France?",
    "And the capital of Germany?",
    "Name a river in that country.",
]
EDITED = "Hi! What is the capital of Italy?"  # replaces the first question: the common prefix shrinks


def _chat(engine: LlamaEngine, params: GenerationParams) -> list[tuple[str, int, int, int]]:
    """The conversation, then the same one with its first question edited: per turn the reply,
    the prompt's size, the cached tokens and the evaluated ones."""
    out: list[tuple[str, int, int, int]] = []
    for first in (HISTORY[0], EDITED):
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer in one short sentence."}]
        for i, question in enumerate(HISTORY[:2] if first == EDITED else HISTORY):
            messages.append({"role": "user", "content": first if i == 0 else question})
            done = engine.complete_chat(messages, params=params)
            assert done.usage.cached_tokens == done.timings.cache_n
            assert done.timings.prompt_n + done.timings.cache_n == done.usage.prompt_tokens
            assert engine.context.memory_seq_pos_max(0) + 1 == len(engine.context_tokens)
            out.append((done.text, done.usage.prompt_tokens, done.usage.cached_tokens, done.timings.prompt_n))
            messages.append({"role": "assistant", "content": done.message.content})
    return out


def _check_same_replies(engine: LlamaEngine) -> None:
    cached, fresh = _chat(engine, GREEDY), _chat(engine, UNCACHED)
    assert [t[0] for t in cached] == [t[0] for t in fresh]
    assert all(t[2] == 0 for t in fresh)
    assert all(t[0] for t in cached)  # the model said something each turn
    n_turns = len(HISTORY)
    # from the second turn on, only the new turn is evaluated: the history comes from the cache
    for _text, n_prompt, n_cached, n_evaluated in cached[1:n_turns]:
        assert n_cached > n_prompt // 2 and n_evaluated == n_prompt - n_cached
    # the edit keeps only the part before the first question (the previous turn's prompt reaches further)
    edited_first = cached[n_turns]
    assert 0 < edited_first[2] < cached[0][1]
    assert cached[n_turns + 1][2] > edited_first[1] // 2  # and the edited chat is cached again


@pytest.mark.model
@pytest.mark.parametrize("name", ["smollm2", pytest.param("gemma3", marks=pytest.mark.slow)])
def test_greedy_replies_are_the_same_with_the_cache(name: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(f"{name}_path")
    with LlamaEngine.load(path, ModelParams(n_ctx=2048, n_ubatch=1, n_threads=2)) as engine:
        _check_same_replies(engine)


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=4096, n_threads=2)) as engine:
        yield engine


@pytest.fixture(scope="module")
def one_by_one(smollm2_path: Path) -> Iterator[LlamaEngine]:
    """One token per ubatch: cached and fresh evaluations compute alike (see the module's docstring)."""
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_ubatch=1, n_threads=2)) as engine:
        yield engine


def _held(engine: LlamaEngine) -> int:
    return engine.context.memory_seq_pos_max(0) + 1


@pytest.mark.model
def test_the_record_is_what_the_kv_cache_holds(one_by_one: LlamaEngine) -> None:
    engine = one_by_one
    prompt = engine.tokenize("Once upon a time")
    # max_tokens: the last sampled token is never decoded
    result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=6, cache_prompt=False))
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert engine.context_tokens == tuple(prompt + result.tokens[:-1]) and _held(engine) == len(prompt) + 5

    # the same prompt again: everything but its last token comes from the cache
    stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=6))
    assert stream.n_cached == len(prompt) - 1
    assert [c.token for c in stream if c.token is not None] == result.tokens

    # a continuation of what was generated reuses the generated tokens too
    longer = prompt + result.tokens[:-1]
    stream = engine.generate(longer, GenerationParams(greedy=True, max_tokens=3))
    assert stream.n_cached == len(longer) - 1
    via_cache = [c.token for c in stream if c.token is not None]
    assert via_cache == engine.complete(longer, GenerationParams(greedy=True, max_tokens=3, cache_prompt=False)).tokens

    # closed early, after three tokens: the third was sampled, not decoded
    with engine.generate(prompt, GenerationParams(greedy=True, max_tokens=20)) as stream:
        got = [next(stream).token for _ in range(3)]
    assert engine.context_tokens == tuple(prompt + got[:2]) and _held(engine) == len(prompt) + 2

    # an end-of-generation token is not decoded either; everything before it is
    chat = engine.tokenize(engine.chat_template([{"role": "user", "content": "Say hello."}]).prompt)
    done = engine.complete(chat, GenerationParams(greedy=True, max_tokens=200))
    assert done.stop_reason is StopReason.EOG
    assert engine.context_tokens == tuple(chat + done.tokens) and _held(engine) == len(chat) + len(done.tokens)


@pytest.mark.model
def test_cache_prompt_off_clears_then_records(smollm2: LlamaEngine) -> None:
    engine = smollm2
    prompt = engine.tokenize("The capital of France is")
    engine.complete(prompt, GREEDY)
    stream = engine.generate(prompt, UNCACHED)
    assert stream.n_cached == 0
    result = list(stream)
    assert result[-1].timings is not None and result[-1].timings.n_prompt == len(prompt)
    assert engine.generate(prompt, GREEDY).n_cached == len(prompt) - 1  # the next one may use it again


@pytest.mark.model
def test_a_memory_cleared_behind_the_engine_is_not_trusted(smollm2: LlamaEngine) -> None:
    engine = smollm2
    prompt = engine.tokenize("The capital of France is")
    expected = engine.complete(prompt, UNCACHED).tokens
    engine.context.memory_clear()
    stream = engine.generate(prompt, GREEDY)
    assert stream.n_cached == 0
    assert [c.token for c in stream if c.token is not None] == expected


@pytest.mark.model
def test_refused_requests_leave_the_record_consistent(smollm2: LlamaEngine) -> None:
    engine = smollm2
    prompt = engine.tokenize("The capital of France is")
    engine.complete(prompt, GREEDY)
    with pytest.raises(LlamaInferenceException):
        engine.generate(prompt + engine.tokenize(" not", add_special=False), GenerationParams(max_tokens=-5))
    assert _held(engine) == len(engine.context_tokens) and engine.context_tokens == tuple(prompt)
    too_long = prompt + engine.tokenize(" word" * 5000, add_special=False)
    with pytest.raises(LlamaException, match="does not fit the context"):
        engine.generate(too_long, GREEDY)
    assert _held(engine) == len(engine.context_tokens)
    assert engine.context_tokens == tuple(prompt)  # the common prefix was kept, nothing else
    with pytest.raises(LlamaInferenceException):
        engine.generate([], GREEDY)
    assert engine.context_tokens == tuple(prompt)


@pytest.mark.model
def test_a_cancelled_prompt_keeps_what_was_evaluated(smollm2: LlamaEngine) -> None:
    engine = smollm2
    prompt = engine.tokenize("The quick brown fox jumps over the lazy dog. " * 180)  # ~1800 tokens, 4 ubatches
    stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=4, cache_prompt=False))
    evaluating = threading.Event()
    canceller = threading.Thread(target=lambda: (evaluating.wait(), engine.cancel()))
    canceller.start()
    evaluating.set()
    chunks = list(stream)
    canceller.join()
    assert chunks[-1].stop_reason is StopReason.CANCELLED
    held = _held(engine)
    assert held < len(prompt) and held % 512 == 0 and engine.context_tokens == tuple(prompt[:held])
    # the next run of the prompt starts where the cancelled one stopped, and says the same: its
    # ubatches (of 512 tokens from the start; `held` is a multiple) are a fresh run's
    stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=4))
    assert stream.n_cached == held
    assert [c.token for c in stream if c.token is not None] == engine.complete(prompt, UNCACHED).tokens[:4]


@pytest.mark.model
def test_a_full_context_leaves_the_record_consistent(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_ubatch=1, n_threads=2)) as engine:
        prompt = engine.tokenize("Count from one to one thousand: one, two, three,")
        vocab = engine.model.vocab
        no_end = {t: float("-inf") for t in range(vocab.n_tokens) if vocab.is_eog(t)}  # fill the context
        result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=-1, logit_bias=no_end))
        assert result.stop_reason is StopReason.CONTEXT_FULL
        assert _held(engine) == len(engine.context_tokens) == 256
        assert engine.context_tokens == tuple(prompt + result.tokens)[:256]
        again = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=24, logit_bias=no_end))
        assert again.n_cached == len(prompt) - 1
        assert [c.token for c in again if c.token is not None] == result.tokens[:24]


@pytest.mark.model
def test_usage_and_timings_report_the_cache(smollm2: LlamaEngine) -> None:
    engine = smollm2
    messages = [{"role": "user", "content": "Hi!"}]
    first = engine.complete_chat(messages, params=UNCACHED)
    messages += [{"role": "assistant", "content": first.message.content}, {"role": "user", "content": "Bye!"}]
    with engine.create(messages, params=GREEDY) as stream:
        chunks = list(stream)
    last = chunks[-1]
    assert last.usage is not None and last.timings is not None
    n_cached = last.usage.cached_tokens
    assert n_cached > first.usage.prompt_tokens
    wire = last.to_openai("chatcmpl-x", "m", 0, include_usage=True)
    assert wire[1]["usage"]["prompt_tokens_details"] == {"cached_tokens": n_cached}
    assert wire[-1]["timings"]["cache_n"] == n_cached
    assert wire[-1]["timings"]["prompt_n"] == last.usage.prompt_tokens - n_cached


# -- the native side: what a memory can keep ------------------------------------------------------


def _decode(context: Context, tokens: list[int]) -> None:
    batch = Batch(context, len(tokens))
    try:
        for start in range(0, len(tokens), context.n_batch):
            part = tokens[start:start + context.n_batch]
            batch.set_sequence(part, start)
            context.decode(batch)
    finally:
        batch.close()


@pytest.mark.model
def test_keep_prefix_on_a_sliding_window_cache(gemma3_path: Path) -> None:
    """Gemma 3 attends through a 512-token window in most layers. A full-size window cache (the
    default) can be cut anywhere; a window-sized one (1024 cells here) forgets older positions, and
    a prefix whose next token needs them is refused: the memory is cleared."""
    with LlamaEngine.load(gemma3_path, ModelParams(n_ctx=2048, n_threads=2)) as engine:
        model = engine.model
        tokens = engine.tokenize("The quick brown fox jumps over the lazy dog. " * 130)[:1200]
        assert len(tokens) == 1200
        for swa_full in (True, False):
            context = Context(model, ContextOptions(n_ctx=2048, n_batch=512, n_ubatch=512, swa_full=swa_full))
            try:
                _decode(context, tokens)  # a window-sized cache now holds positions 176..1199
                assert context.keep_prefix(1000) and context.memory_seq_pos_max(0) == 999  # needs 489..999
                assert context.keep_prefix(600) is swa_full  # needs 89..599
                assert context.memory_seq_pos_max(0) == (599 if swa_full else -1)
                context.memory_clear()
                _decode(context, tokens[:300])  # inside the window: nothing forgotten
                assert context.keep_prefix(200) and context.memory_seq_pos_max(0) == 199
                assert not context.keep_prefix(250)  # more than it holds: not what the caller thinks
                assert context.memory_seq_pos_max(0) == -1
                assert context.keep_prefix(0) and context.memory_seq_pos_max(0) == -1
            finally:
                context.close()
