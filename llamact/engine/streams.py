"""A running generation as every runtime hands it on: the ``TokenStream`` contract, llama.cpp's
single-sequence implementation of it (``GenerationStream``) and the collector of a whole one.

    stream = engine.generate(prompt, params)       # a TokenStream, whichever runtime made it
    for chunk in stream: ...                       # GenerationChunk values; the last has stop_reason
    stream.interrupt()                             # from any thread: it ends (StopReason.CANCELLED)
    stream.close()                                 # stop it and release what it holds, once

What enters ``GenerationStream``: the token loop's chunks, the engine's release (its lock, the
sampler, the media) and its abort. What leaves: the chunks, unchanged. ``collect`` turns a whole
stream into a ``GenerationResult`` (what ``complete()`` returns on every runtime). The other
implementations are a batch slot's ``batched.SequenceStream`` and LiteRT-LM's
``litert_generation.RuntimeGeneration``; ``ChatStream`` reads any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from ..errors import LlamaInferenceException
from .decode import GenerationChunk
from .generator import GenerationResult
from .logprobs import TokenLogprob

__all__ = ["GenerationStream", "TokenStream", "collect"]


class TokenStream(Protocol):
    """One generation's chunks: text pieces (``GenerationChunk``), the last one carrying the stop
    reason and the timings. What every runtime's ``generate()`` returns and ``ChatStream`` reads.

    - iterating gives the chunks in order, then stops (after the chunk with ``stop_reason``);
    - ``interrupt()`` may be called from any thread: the stream ends soon, with
      ``StopReason.CANCELLED``; after the end it does nothing;
    - ``close()`` stops the generation if it still runs and releases what it holds (the engine,
      a slot, the runtime's session), exactly once however often it is called;
    - ``n_cached``: the prompt tokens reused from a cache rather than evaluated (0 where none).
    """

    @property
    def n_cached(self) -> int: ...

    def __iter__(self) -> Iterator[GenerationChunk]: ...

    def __next__(self) -> GenerationChunk: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


class GenerationStream:
    """llama.cpp's single-sequence ``TokenStream``: it releases its engine exactly once -- at the end,
    on ``close()``, on leaving a ``with`` block, or when garbage-collected unfinished."""

    def __init__(self, chunks: Iterator[GenerationChunk], release: Callable[[], None], n_cached: int = 0,
                 abort: Callable[[], None] | None = None) -> None:
        self._chunks = chunks
        self.n_cached = n_cached  # prompt tokens reused from the KV cache, not evaluated again
        self.n_decoded = 0        # chunks so far (one per generated token): what a server's /slots shows
        self._release: Callable[[], None] | None = release
        self._abort = abort

    def __iter__(self) -> GenerationStream:
        return self

    def __next__(self) -> GenerationChunk:
        if self._release is None:
            raise StopIteration
        try:
            chunk = next(self._chunks)
            self.n_decoded += 1
            return chunk
        except BaseException:
            self.close()
            raise

    def interrupt(self) -> None:
        """Stop the generation from any thread (the engine runs one at a time: this is it while the
        stream holds the engine; once released, nothing)."""
        if self._release is not None and self._abort is not None:
            self._abort()

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            try:
                close = getattr(self._chunks, "close", None)   # a generator; a plain iterator has none
                if close is not None:
                    close()
            finally:
                release()

    def __enter__(self) -> GenerationStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def collect(stream: TokenStream, prompt_tokens: Sequence[int], logprobs: bool) -> GenerationResult:
    """Run ``stream`` to its end: its text, tokens, stop and timings (``logprobs``: one entry per
    generated token, the end token's not counted)."""
    pieces: list[str] = []
    out_tokens: list[int] = []
    entries: list[TokenLogprob] = []
    last: GenerationChunk | None = None
    try:
        for chunk in stream:
            pieces.append(chunk.text)
            if chunk.token is not None:
                out_tokens.append(chunk.token)
                if chunk.logprob is not None:
                    entries.append(chunk.logprob)
            last = chunk
    finally:
        stream.close()
    if last is None or last.stop_reason is None or last.timings is None:
        raise LlamaInferenceException("generation ended without a final chunk")
    return GenerationResult("".join(pieces), list(prompt_tokens), out_tokens, last.stop_reason, last.timings,
                            stop_string=last.stop_string, logprobs=entries if logprobs else None)
