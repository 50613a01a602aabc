"""A LiteRT-LM generation as the engine's chunk stream: text pieces in, ``GenerationChunk`` values out.

    generation = RuntimeGeneration(stream, stops=..., max_tokens=..., n_prompt=..., n_ctx=...,
                                   token_count=..., path="conversation", release=...)
    for chunk in generation: ...        # ChatStream reads it as it reads a GenerationStream

What enters: the runtime's text pieces (``backends.litert.RuntimeStream``), the stop strings
llamact applies to the text (the request's and the template's additional stops: the runtime knows
only its stop tokens), the output limit, the prompt's length and the context's size. What leaves:
one chunk per piece (text that cannot begin a stop string), then a final chunk with the stop reason
(an end token, a stop string, ``max_tokens``, a full context, or a cancellation) and the timings.
``token_count`` (a conversation's KV-cache count after the reply) gives the generated tokens
exactly; without it each piece counts as a token (the runtime streams one piece per token).
``close()`` stops the runtime and releases the engine exactly once; ``interrupt()`` and the
engine's ``cancel()`` stop it from another thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence

from ..backends.litert import RuntimeStream
from .decode import GenerationChunk, StopReason, Timings
from .stops import StopMatcher

__all__ = ["RuntimeGeneration"]


class RuntimeGeneration:
    """See the module docstring."""

    n_cached = 0   # the runtime keeps no prompt cache between requests that llamact could reuse

    def __init__(self, stream: RuntimeStream | None, *, stops: Sequence[str], max_tokens: int | None, n_prompt: int,
                 n_ctx: int, token_count: Callable[[], int | None], path: str,
                 release: Callable[[], None], started: float | None = None) -> None:
        self.path = path   # "conversation" (the runtime's Conversation API), "rendered" or "prompt"
        self.reason = ""   # why a chat request did not take the conversation path
        self._started = started if started is not None else time.perf_counter()
        self._stream = stream
        self._matcher = StopMatcher(stops)
        self._max_tokens = max_tokens
        self._n_prompt = n_prompt
        self._n_ctx = n_ctx
        self._token_count = token_count
        self._release: Callable[[], None] | None = release
        self._cancelled = False
        self._chunks = self._run()

    def __iter__(self) -> RuntimeGeneration:
        return self

    def __next__(self) -> GenerationChunk:
        try:
            return next(self._chunks)
        except BaseException:
            self.close()
            raise

    def interrupt(self) -> None:
        """Stop from any thread: the stream ends with ``StopReason.CANCELLED``."""
        self._cancelled = True
        if self._stream is not None:
            self._stream.cancel()

    def close(self) -> None:
        self._chunks.close()
        if self._stream is not None:
            self._stream.close()
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> RuntimeGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _run(self) -> Generator[GenerationChunk, None, None]:
        started = self._started
        first: float | None = None
        pieces = 0
        reason: StopReason | None = None
        if self._stream is not None and self._max_tokens != 0:
            for piece in self._stream:
                if first is None:
                    first = time.perf_counter()
                pieces += 1
                text, hit = self._matcher.feed(piece)
                if hit:
                    reason = StopReason.STOP_STRING
                    self._stream.cancel()
                    if text:
                        yield GenerationChunk(text)
                    break
                if text:
                    yield GenerationChunk(text)
        ended = time.perf_counter()
        first = first if first is not None else ended
        tail = "" if reason is StopReason.STOP_STRING else self._matcher.flush()
        total = self._token_count()
        n_generated = max(0, total - self._n_prompt) if total is not None else pieces
        if reason is None:
            reason = self._reason(n_generated)
        timings = Timings(self._n_prompt, n_generated, (first - started) * 1000, (ended - first) * 1000)
        yield GenerationChunk(tail, stop_reason=reason, timings=timings, stop_string=self._matcher.matched)

    def _reason(self, n_generated: int) -> StopReason:
        if self._cancelled:
            return StopReason.CANCELLED
        if self._max_tokens is not None and n_generated >= self._max_tokens:
            return StopReason.MAX_TOKENS
        if self._n_prompt + n_generated >= self._n_ctx:
            return StopReason.CONTEXT_FULL
        return StopReason.EOG
