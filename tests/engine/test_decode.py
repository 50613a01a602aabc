"""SequenceDecoder, the per-sequence rules both generation loops share: text (UTF-8 hold-back), stop
strings, limits, the end token, timings, logprob entries, and several tokens at once (no model: a
fake vocabulary of byte pieces and fake logits rows)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pytest

import llamact
import llamact.engine
from llamact.engine import decode, generator
from llamact.engine.decode import GenerationChunk, SequenceDecoder, StopReason
from llamact.engine.logprobs import LogprobReader
from llamact.errors import LlamaInferenceException, LlamaStateException

END = 13   # the fake vocabulary's end-of-generation token
PIECES: dict[int, bytes] = {
    0: b"Hello", 1: b" wor", 2: b"ld", 3: b"!", 4: b"\xc3", 5: b"\xa9",   # 4 + 5: "é"
    6: b"\xf0\x9f", 7: b"\x98\x80",                                       # 6 + 7: "😀"
    8: b" <", 9: b"|", 10: b"end", 11: b"|>", 12: b"\n",
    END: b"<|im_end|>",                                                   # its text, when it is rendered
    14: b"\xe2\x82", 15: b"\xac",                                         # 14 + 15: "€"
}
N_VOCAB = len(PIECES)


class FakeVocab:
    """What LogprobReader asks of a vocabulary."""

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        return PIECES[token]


def is_end(token: int) -> bool:
    return token == END


ROWS = np.random.default_rng(7).normal(size=(64, N_VOCAB)).astype(np.float32)


@contextmanager
def logits(index: int) -> Iterator[np.ndarray]:
    yield ROWS[index]


def decoder(stop: Sequence[str] = (), max_tokens: int = -1, *, n_ctx: int = 100, room: int = 100,
            logprobs: bool = False, n_prompt: int = 5, n_cached: int = 0) -> SequenceDecoder:
    reader = LogprobReader(FakeVocab(), 2) if logprobs else None  # type: ignore[arg-type]
    return SequenceDecoder(stop, max_tokens, n_ctx, room, n_prompt, n_cached, logprobs=reader,
                           logits=logits if logprobs else None, is_end=is_end)


def feed(d: SequenceDecoder, tokens: Sequence[int], indices: Sequence[int] | None = None) -> list[GenerationChunk]:
    """Token by token, as the loops feed it: ``take`` a generated token, ``end`` an end token, until
    the decoder says the sequence ended; then the final chunk."""
    chunks = []
    d.prompt_done()
    for i, token in enumerate(tokens):
        if d.reason is not None:
            break
        index = indices[i] if indices is not None else -1
        if token == END:
            d.end(token, PIECES[END], index)
            break
        chunks.append(d.take(token, PIECES[token], index))
    if d.reason is None:
        d.stop(StopReason.CANCELLED)
    return [*chunks, d.finish()]


def text_of(chunks: Sequence[GenerationChunk]) -> str:
    return "".join(chunk.text for chunk in chunks)


# -- text ----------------------------------------------------------------------------------------


def test_each_token_gives_a_chunk_and_the_last_chunk_ends_the_stream() -> None:
    chunks = feed(decoder(max_tokens=3), [0, 1, 2, 3])
    assert [(c.text, c.token) for c in chunks[:-1]] == [("Hello", 0), (" wor", 1), ("ld", 2)]
    final = chunks[-1]
    assert (final.text, final.token, final.stop_reason, final.stop_string, final.end_token) == (
        "", None, StopReason.MAX_TOKENS, None, None)
    assert final.finish_reason == "length"
    assert all(c.stop_reason is None and c.timings is None and not c.incomplete for c in chunks[:-1])


def test_a_character_split_across_tokens_waits_for_its_last_byte() -> None:
    chunks = feed(decoder(max_tokens=6), [4, 5, 6, 7, 14, 15])
    assert [(c.text, c.incomplete) for c in chunks[:-1]] == [
        ("", True), ("é", False), ("", True), ("😀", False), ("", True), ("€", False)]
    assert chunks[-1].text == ""


def test_a_character_cut_off_by_the_end_becomes_a_replacement_character() -> None:
    chunks = feed(decoder(max_tokens=2), [0, 6])
    assert chunks[1] == GenerationChunk("", 6, incomplete=True)
    assert chunks[-1].text == "\ufffd"


# -- stop strings --------------------------------------------------------------------------------


def test_a_stop_string_split_across_tokens_ends_the_text_before_it() -> None:
    chunks = feed(decoder(["world"]), [0, 1, 2, 3])
    assert text_of(chunks) == "Hello "
    final = chunks[-1]
    assert (final.stop_reason, final.stop_string, final.finish_reason) == (StopReason.STOP_STRING, "world", "stop")
    assert [c.token for c in chunks[:-1]] == [0, 1, 2]     # the stop string's last token has its chunk
    assert chunks[2] == GenerationChunk("", 2)             # held back for the stop string: not incomplete


def test_text_held_for_a_stop_string_that_never_comes_is_released_at_the_end() -> None:
    chunks = feed(decoder(["world!"], max_tokens=3), [0, 1, 2])
    assert [c.text for c in chunks] == ["Hello", " ", "", "world"]
    assert chunks[-1].stop_reason is StopReason.MAX_TOKENS and chunks[-1].stop_string is None


def test_a_stop_string_over_a_split_character() -> None:
    chunks = feed(decoder(["é!"]), [0, 4, 5, 3, 0])
    assert text_of(chunks) == "Hello"
    assert chunks[-1].stop_string == "é!"


# -- the end token ---------------------------------------------------------------------------------


def test_an_end_token_rendered_as_text_ends_the_final_chunk() -> None:
    d = decoder(["world!"])
    chunks = feed(d, [0, 1, END, 2])
    assert [c.text for c in chunks] == ["Hello", " ", "wor<|im_end|>"]   # the held text, then the end token's
    final = chunks[-1]
    assert (final.stop_reason, final.end_token, final.token, final.stop_string) == (StopReason.EOG, END, None, None)
    assert final.timings is not None and final.timings.n_generated == 2     # the end token is not counted


def test_an_end_token_without_text() -> None:
    d = decoder()
    d.prompt_done()
    d.take(0, PIECES[0])
    d.end(END)
    final = d.finish()
    assert (final.text, final.stop_reason, final.end_token) == ("", StopReason.EOG, END)


def test_a_stop_string_in_the_end_tokens_text_makes_it_a_stop_string_end() -> None:
    chunks = feed(decoder(["<|im"]), [0, END])
    final = chunks[-1]
    assert text_of(chunks) == "Hello"
    assert (final.stop_reason, final.stop_string, final.end_token) == (StopReason.STOP_STRING, "<|im", END)


# -- limits ----------------------------------------------------------------------------------------


def test_max_tokens_zero_ends_before_the_first_token() -> None:
    d = decoder(max_tokens=0)
    assert d.reason is StopReason.MAX_TOKENS
    assert d.take_run([0, 1], [PIECES[0], PIECES[1]]) == ([], 0)
    final = d.finish()
    assert (final.text, final.stop_reason) == ("", StopReason.MAX_TOKENS)
    assert final.timings is not None and final.timings.n_generated == 0


def test_the_room_in_the_context_ends_the_sequence() -> None:
    chunks = feed(decoder(max_tokens=10, room=2), [0, 1, 2, 3])
    assert [c.token for c in chunks[:-1]] == [0, 1]
    assert chunks[-1].stop_reason is StopReason.CONTEXT_FULL and chunks[-1].text == ""


def test_max_tokens_is_checked_before_the_room() -> None:
    assert feed(decoder(max_tokens=2, room=2), [0, 1, 2])[-1].stop_reason is StopReason.MAX_TOKENS


def test_no_max_tokens_means_n_ctx_tokens() -> None:
    chunks = feed(decoder(max_tokens=-1, n_ctx=3, room=5), [0, 1, 2, 3, 0])
    assert len(chunks) == 4 and chunks[-1].stop_reason is StopReason.MAX_TOKENS


def test_a_stop_string_is_checked_before_the_limits() -> None:
    assert feed(decoder(["world"], max_tokens=3), [0, 1, 2])[-1].stop_reason is StopReason.STOP_STRING


def test_the_loop_stops_it_and_the_held_text_is_released() -> None:
    d = decoder(["world!"])
    chunks = [d.take(0, PIECES[0]), d.take(1, PIECES[1])]
    d.stop(StopReason.CANCELLED)
    final = d.finish()
    assert text_of([*chunks, final]) == "Hello wor" and final.stop_reason is StopReason.CANCELLED


def test_a_stop_from_the_loop_replaces_max_tokens_zero() -> None:
    d = decoder(max_tokens=0)   # the prompt's evaluation was cancelled
    d.stop(StopReason.CANCELLED)
    assert d.finish().stop_reason is StopReason.CANCELLED


# -- timings and logprobs ------------------------------------------------------------------------


def test_timings_count_the_prompt_the_cache_and_the_generated_tokens() -> None:
    d = decoder(max_tokens=2, n_prompt=7, n_cached=3)
    t = feed(d, [0, 1])[-1].timings
    assert t is not None
    assert (t.n_prompt, t.n_cached, t.n_generated) == (7, 3, 2)
    assert t.prompt_ms >= 0 and t.decode_ms >= 0


def test_prompt_done_at_a_given_time() -> None:
    d = decoder(max_tokens=0)
    d.prompt_done(d._t_start + 0.25)
    t = d.finish().timings
    assert t is not None and t.prompt_ms == pytest.approx(250)


def test_each_chunk_has_its_tokens_logprob_entry_and_the_final_chunk_the_end_tokens() -> None:
    reader = LogprobReader(FakeVocab(), 2)  # type: ignore[arg-type]
    chunks = feed(decoder(logprobs=True), [0, 4, END], indices=[3, 4, 5])
    assert [c.logprob for c in chunks] == [reader.read(ROWS[3], 0), reader.read(ROWS[4], 4), reader.read(ROWS[5], END)]
    assert chunks[1].logprob is not None and chunks[1].logprob.token == ""   # an incomplete character's prefix
    assert len(chunks[0].logprob.top_logprobs) == 2                          # type: ignore[union-attr]


def test_no_logprobs_no_entries() -> None:
    chunks = feed(decoder(), [0, END])
    assert all(c.logprob is None for c in chunks)


def test_an_end_reason_other_than_the_end_token_has_no_final_entry() -> None:
    chunks = feed(decoder(["world"], logprobs=True), [0, 1, 2], indices=[0, 1, 2])
    assert chunks[-1].logprob is None and all(c.logprob is not None for c in chunks[:-1])


# -- several tokens at once ------------------------------------------------------------------------


def run_in_pieces(d: SequenceDecoder, tokens: Sequence[int], cuts: Sequence[int],
                  indices: Sequence[int] | None) -> tuple[list[GenerationChunk], int]:
    """``tokens`` fed as runs cut at ``cuts``, like verified draft tokens; the final chunk last."""
    chunks: list[GenerationChunk] = []
    taken = 0
    d.prompt_done()
    bounds = [0, *cuts, len(tokens)]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        run = tokens[start:stop]
        got, n = d.take_run(run, [PIECES[t] for t in run], indices[start:stop] if indices is not None else None)
        assert n <= len(run) and len(got) in (n, n - 1)
        chunks += got
        taken += n
        if n < len(run):
            assert d.reason is not None   # only an end stops a run early
    if d.reason is None:
        d.stop(StopReason.CANCELLED)
    return [*chunks, d.finish()], taken


def same(a: Sequence[GenerationChunk], b: Sequence[GenerationChunk]) -> bool:
    def key(c: GenerationChunk) -> tuple[object, ...]:
        t = c.timings
        return (c._replace(timings=None), t and (t.n_prompt, t.n_generated, t.n_cached))
    return [key(c) for c in a] == [key(c) for c in b]


STOP_SETS: list[tuple[str, ...]] = [(), ("world",), ("<|end|>", "!\n"), ("é",), ("<|im",), ("ld!", "😀"), ("€|",)]


@pytest.mark.parametrize("seed", range(8))
def test_a_run_of_tokens_gives_exactly_what_one_by_one_gives(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        n = rng.randint(0, 24)
        tokens = [rng.choice([t for t in PIECES if t != END]) if rng.random() > 0.06 else END for _ in range(n)]
        stop = rng.choice(STOP_SETS)
        max_tokens = rng.choice([-1, 0, 1, 3, rng.randint(0, 30)])
        room, n_ctx = rng.randint(1, 30), rng.randint(1, 30)
        lp = rng.random() < 0.3
        indices = [rng.randrange(len(ROWS)) for _ in tokens] if lp else None
        cuts = sorted(rng.sample(range(1, n), rng.randint(0, n - 1))) if n > 1 else []

        expected = feed(decoder(stop, max_tokens, n_ctx=n_ctx, room=room, logprobs=lp), tokens, indices)
        d = decoder(stop, max_tokens, n_ctx=n_ctx, room=room, logprobs=lp)
        got, taken = run_in_pieces(d, tokens, cuts, indices)
        assert same(got, expected), (tokens, stop, max_tokens, room, cuts)
        # taken: every token with a chunk, and the end token that ended it
        assert taken == len(expected) - 1 + (expected[-1].end_token is not None)


def test_a_run_stops_at_a_stop_string_and_says_how_many_it_took() -> None:
    d = decoder(["world"])
    chunks, n = d.take_run([0, 1, 2, 3, 0], [PIECES[t] for t in (0, 1, 2, 3, 0)])
    assert n == 3 and [c.token for c in chunks] == [0, 1, 2] and d.reason is StopReason.STOP_STRING


def test_a_run_stops_at_an_end_token_which_has_no_chunk() -> None:
    d = decoder()
    chunks, n = d.take_run([0, END, 1], [PIECES[0], PIECES[END], PIECES[1]])
    assert n == 2 and [c.token for c in chunks] == [0]
    assert d.finish().end_token == END


def test_a_run_stops_at_max_tokens() -> None:
    d = decoder(max_tokens=2)
    chunks, n = d.take_run([0, 1, 2], [PIECES[t] for t in (0, 1, 2)])
    assert (n, len(chunks), d.reason) == (2, 2, StopReason.MAX_TOKENS)


def test_a_run_needs_a_piece_per_token_and_to_know_the_end_tokens() -> None:
    with pytest.raises(LlamaInferenceException):
        decoder().take_run([0, 1], [PIECES[0]])
    with pytest.raises(LlamaInferenceException):
        decoder().take_run([0, 1], [PIECES[0], PIECES[1]], [0])
    with pytest.raises(LlamaInferenceException, match="is_end"):
        SequenceDecoder((), -1, 10, 10, 1).take_run([0], [PIECES[0]])


# -- misuse and where the types live ---------------------------------------------------------------


def test_no_final_chunk_before_the_sequence_ended() -> None:
    with pytest.raises(LlamaStateException):
        decoder().finish()


def test_logprobs_need_the_logits_rows() -> None:
    with pytest.raises(LlamaInferenceException, match="logits"):
        SequenceDecoder((), -1, 10, 10, 1, logprobs=LogprobReader(FakeVocab(), 1))  # type: ignore[arg-type]


def test_the_stream_types_are_importable_where_they_were() -> None:
    for name in ("GenerationChunk", "StopReason", "Timings"):
        assert getattr(generator, name) is getattr(decode, name) is getattr(llamact.engine, name) \
            is getattr(llamact, name)
