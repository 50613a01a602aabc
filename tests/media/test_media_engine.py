"""Media through the engine's own machinery: the prompt cache keeps a medium by the hash of its bytes
(a second question about the same image evaluates only the new text, a different image evaluates
again), the batched slots give the single-sequence answer and cache media per slot, sessions count a
medium as the embeddings it becomes, and what cannot be saved is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from media_helpers import engine_params, noise_image

from llamact import ChatRequest, ChatSession, GenerationParams, LlamaEngine, LlamaUnsupportedException
from llamact.engine.batched import BatchScheduler
from llamact.json_types import Json

pytestmark = [pytest.mark.model]

GREEDY = GenerationParams(max_tokens=6, temperature=0)


def _ask(image: Json, question: str = "What is in this picture?") -> list[Json]:
    return [{"role": "user", "content": [{"type": "text", "text": question}, image]}]


def _image_span(engine: LlamaEngine, messages: list[Json]) -> tuple[int, int]:
    """Where the request's (only) medium sits in its prompt: (start, end)."""
    chat = engine.prepare_chat(ChatRequest(messages), GREEDY)
    try:
        assert chat.media is not None and len(chat.media.spans) == 1
        span = chat.media.spans[0]
        return span.start, span.end
    finally:
        chat.close()


def test_same_image_is_not_evaluated_again(vision_engine: LlamaEngine) -> None:
    first = _ask(noise_image(10))
    reply = vision_engine.complete_chat(first, params=GREEDY)
    follow_up = first + [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Are you sure?"}]
    start, end = _image_span(vision_engine, follow_up)
    again = vision_engine.complete_chat(follow_up, params=GREEDY)
    # the whole first turn (its image included) was in the cache; only the new turn was evaluated
    assert again.timings.cache_n >= end > start
    assert again.timings.cache_n + again.timings.prompt_n == again.usage.prompt_tokens


def test_a_different_image_is_evaluated_again(vision_engine: LlamaEngine) -> None:
    vision_engine.complete_chat(_ask(noise_image(11)), params=GREEDY)
    other = _ask(noise_image(12))
    start, end = _image_span(vision_engine, other)
    reply = vision_engine.complete_chat(other, params=GREEDY)
    assert reply.timings.cache_n <= start   # the text before the image only
    assert reply.timings.prompt_n >= end - start


def test_same_bytes_are_the_same_image_whatever_the_url(vision_engine: LlamaEngine) -> None:
    """The cache key is the bytes' SHA-256: the same PNG as raw base64 instead of a data: URL is reused."""
    part = noise_image(13)
    url = part["image_url"]["url"]   # type: ignore[index]
    vision_engine.complete_chat(_ask(part), params=GREEDY)
    raw = {"type": "image_url", "image_url": {"url": url.split(",", 1)[1]}}
    _start, end = _image_span(vision_engine, _ask(raw))
    assert vision_engine.complete_chat(_ask(raw), params=GREEDY).timings.cache_n >= end


def test_slots_answer_as_the_single_sequence(smollm2_path: Path, projectors: dict[str, Path],
                                             vision_engine: LlamaEngine) -> None:
    requests = [_ask(noise_image(20)), _ask(noise_image(21, 32, 32), "Describe it."),
                [{"role": "user", "content": "No image here."}]]
    single = [vision_engine.complete_chat(r, params=GREEDY, cache_prompt=False) for r in requests]
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], n_seq_max=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            # one at a time: a slot's batches then hold its own tokens only, as the single sequence's do
            alone = [scheduler.create(r, params=GREEDY).completion() for r in requests]
            assert [a.content for a in alone] == [s.content for s in single]
            assert [a.usage.prompt_tokens for a in alone] == [s.usage.prompt_tokens for s in single]
            # together: two media prompts joining at once, each in its own sequence
            streams = [scheduler.create(r, params=GREEDY) for r in requests[:2]]
            together = [s.completion() for s in streams]
            assert [t.usage.prompt_tokens for t in together] == [s.usage.prompt_tokens for s in single[:2]]
            # a slot keeps its media: the first request again evaluates one token
            repeat = scheduler.create(requests[0], params=GREEDY).completion()
            assert repeat.timings.cache_n == repeat.usage.prompt_tokens - 1
        finally:
            scheduler.close()


def test_a_session_counts_a_medium_as_its_embeddings(vision_engine: LlamaEngine) -> None:
    session = ChatSession(vision_engine)
    session.history.extend([*_ask(noise_image(30)), {"role": "assistant", "content": "A picture."}])
    with_image = session.fit().n_tokens
    text_only = ChatSession(vision_engine)
    text_only.history.extend([{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}]},
                              {"role": "assistant", "content": "A picture."}])
    # SmolLM2's projector makes 16 embeddings of an image; the marker would be a few tokens of text
    assert with_image - text_only.fit().n_tokens == 16
    # a budget that cannot hold the image's turn leaves it out, as it leaves out any old turn
    session.history.extend([{"role": "user", "content": "And now?"}])
    session.max_context_tokens = session.fit().n_tokens - 5 + GREEDY.max_tokens
    fitted = session.fit(params=GREEDY)
    assert fitted.start > 0


def test_a_cache_holding_media_is_not_saved(vision_engine: LlamaEngine, tmp_path: Path) -> None:
    vision_engine.complete_chat(_ask(noise_image(40)), params=GREEDY)
    with pytest.raises(LlamaUnsupportedException, match="images or audio"):
        vision_engine.save_state(tmp_path / "state.bin")
    with pytest.raises(LlamaUnsupportedException, match="images or audio"):
        vision_engine.save_slot(tmp_path / "slot.bin")
    vision_engine.clear_cache()
    vision_engine.complete_chat([{"role": "user", "content": "Hi"}], params=GREEDY)
    vision_engine.save_state(tmp_path / "state.bin")   # text only: saved as before


def test_cancel_before_the_media_are_evaluated(vision_engine: LlamaEngine) -> None:
    stream = vision_engine.create(_ask(noise_image(50)), params=GREEDY)
    vision_engine.cancel()
    chunks = list(stream)
    assert chunks[-1].finish_reason is not None
    # the engine stays usable, and nothing half-evaluated is taken for cached
    reply = vision_engine.complete_chat(_ask(noise_image(50)), params=GREEDY)
    assert reply.usage.completion_tokens > 0
