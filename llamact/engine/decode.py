"""One sequence's generated tokens in, its stream's chunks out: text, stop strings, limits, timings, logprobs.

    decoder = SequenceDecoder(stop, max_tokens, n_ctx, room, n_prompt, n_cached,
                              logprobs=reader, logits=context.borrow_logits, is_end=vocab.is_eog)
    decoder.prompt_done()                       # the prompt is evaluated: the decode time starts
    chunk = decoder.take(token, piece, index)   # a generated token -> its chunk; decoder.reason once it ended
    decoder.end(token, piece, index)            # the model's end-of-generation token ended it
    decoder.stop(StopReason.CANCELLED)          # the loop ended it (cancelled; its context full)
    chunks, n = decoder.take_run(tokens, pieces, indices)   # several accepted tokens: as if one by one
    final = decoder.finish()                    # the final chunk: the tail, stop reason, timings

Both generation loops (``generator._token_loop``, one sequence; ``batched.BatchScheduler``, the slots)
feed their sampled tokens here, so each per-sequence rule exists once; the loops keep decoding,
sampling and the KV cache. What enters: each token with its piece as the loop rendered it (bytes;
an end token's is b"" unless it is rendered as text), and with logprobs the index of the logits
row it was sampled from. What leaves: one ``GenerationChunk`` per generated token (its text: whole
UTF-8 characters that cannot be the start of a stop string; ``incomplete`` when the token ended
inside a character) and a final chunk with the held-back tail, the ``StopReason``, the
``Timings``, the stop string, the end token and its logprob entry. The sequence ends at a stop
string, ``max_tokens`` (-1: ``n_ctx``), its ``room`` in the context, an end token, or when the loop
says so; tokens given after that are not taken (``take_run`` says how many were). Raises what the
logprob read raises (``LlamaInferenceException``: no logits row at that index); ``take_run`` raises
``LlamaInferenceException`` for runs whose lengths disagree, ``finish`` ``LlamaStateException``
before the sequence ended.

The per-token path (``take``) is the hot path of generation: a few attribute reads, the UTF-8 and
stop-string feeds, and the chunk (a NamedTuple: several times cheaper to build than a frozen
dataclass). Nothing else is allocated per token.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import LlamaInferenceException, LlamaStateException
from .detokenizer import Utf8Stream
from .logprobs import LogprobReader, TokenLogprob
from .stops import StopMatcher

__all__ = ["GenerationChunk", "SequenceDecoder", "StopReason", "Timings"]


class StopReason(str, enum.Enum):
    EOG = "eog"                    # the model produced an end-of-generation token
    STOP_STRING = "stop_string"    # a requested stop string appeared (it is not in the text)
    MAX_TOKENS = "max_tokens"      # the max_tokens budget was used up
    CONTEXT_FULL = "context_full"  # no room left in the context
    CANCELLED = "cancelled"        # the caller closed the stream or asked to stop

    @property
    def finish_reason(self) -> str:
        """OpenAI's coarser name: "stop" or "length"."""
        return "stop" if self in (StopReason.EOG, StopReason.STOP_STRING, StopReason.CANCELLED) else "length"


@dataclass(frozen=True)
class Timings:
    """``n_prompt`` prompt tokens evaluated in ``prompt_ms`` (after ``n_cached`` reused from the
    KV cache: the prompt has ``n_cached + n_prompt`` tokens), ``n_generated`` in ``decode_ms``."""

    n_prompt: int
    n_generated: int
    prompt_ms: float
    decode_ms: float
    n_cached: int = 0
    # speculative decoding (llama-server's draft_n / draft_n_accepted): tokens drafted, and how many
    # of them the target kept
    n_draft: int = 0
    n_draft_accepted: int = 0

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.n_prompt / (self.prompt_ms / 1000) if self.prompt_ms > 0 else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.n_generated / (self.decode_ms / 1000) if self.decode_ms > 0 else 0.0


class GenerationChunk(NamedTuple):
    """One step of a stream: ``text`` may be "" (held back); the last chunk has ``stop_reason``.

    Immutable like the other values that cross stages; a NamedTuple because one is made per
    token and it is several times cheaper to build than a frozen dataclass.
    """

    text: str
    token: int | None = None
    stop_reason: StopReason | None = None
    timings: Timings | None = None
    stop_string: str | None = None  # the stop string that ended generation (final chunk only)
    # the end-of-generation token the model sampled (final chunk only): not part of the text or of
    # ``Timings.n_generated``, but llama-server lists and counts it (``return_tokens``, usage)
    end_token: int | None = None
    # with ``GenerationParams.logprobs``: the token's logprob and its top alternatives (on the final
    # chunk: the end-of-generation token's, when one ended it)
    logprob: TokenLogprob | None = None
    # the token ended inside a UTF-8 character: its text waits for the rest (llama-server sends no
    # event for such a token; held-back text of a possible stop string is not this)
    incomplete: bool = False

    @property
    def finish_reason(self) -> str | None:
        return self.stop_reason.finish_reason if self.stop_reason else None


# ``Context.borrow_logits``: ``with logits(index) as row`` gives the logits row of output ``index``
Logits = Callable[[int], AbstractContextManager[np.ndarray]]



def _no_logits(index: int) -> AbstractContextManager[np.ndarray]:
    raise LlamaInferenceException("no logits rows were given to this decoder", {"index": index})


_STOP_STRING, _MAX_TOKENS, _CONTEXT_FULL, _EOG = (
    StopReason.STOP_STRING, StopReason.MAX_TOKENS, StopReason.CONTEXT_FULL, StopReason.EOG)


class SequenceDecoder:
    """The per-sequence state of one generation: text, stop strings, limits, timings, logprobs.

    ``max_tokens``: the most tokens generated (-1: ``n_ctx``). ``room``: how many tokens the
    sequence may generate before its context is full (the loop knows how its KV cache fills).
    ``n_prompt`` / ``n_cached``: the prompt tokens evaluated / found in the KV cache (``Timings``).
    ``logprobs`` (with ``logits``, where the rows are read): each token's logprob entry. ``is_end``:
    whether a token ends generation (``take_run`` asks it; ``take`` and ``end`` are told). The clock
    starts at construction: the prompt's time runs until ``prompt_done``, the decode time from then
    to ``finish``. ``max_tokens`` 0 ends the sequence before its first token (``reason`` is set).
    """

    __slots__ = (
        "reason", "n_generated", "end_token", "_feed_utf8", "_feed_stops", "_utf8", "_stops", "_limit", "_bound",
        "_reader", "_logits", "_is_end", "_n_prompt", "_n_cached", "_end_text", "_end_entry", "_t_start",
        "_t_prompt_done", "n_draft", "n_draft_accepted",
    )

    def __init__(self, stop: Sequence[str], max_tokens: int, n_ctx: int, room: int, n_prompt: int,
                 n_cached: int = 0, *, logprobs: LogprobReader | None = None, logits: Logits | None = None,
                 is_end: Callable[[int], bool] | None = None) -> None:
        if logprobs is not None and logits is None:
            raise LlamaInferenceException("logprobs need the logits rows: give logits (Context.borrow_logits)")
        self._utf8 = utf8 = Utf8Stream()
        self._stops = stops = StopMatcher(stop)
        self._feed_utf8, self._feed_stops = utf8.feed, stops.feed
        self._limit = limit = max_tokens if max_tokens >= 0 else n_ctx
        self._bound = min(limit, room)   # one comparison per token finds both limits
        self._reader, self._is_end = logprobs, is_end
        self._logits: Logits = logits if logits is not None else _no_logits
        self._n_prompt, self._n_cached = n_prompt, n_cached
        self.reason: StopReason | None = _MAX_TOKENS if limit == 0 else None   # why it ended; None: going on
        self.n_generated = 0
        self.end_token: int | None = None   # the end-of-generation token that ended it
        self._end_text = ""                 # that token's text (after UTF-8 and stops), when it is rendered
        self._end_entry: TokenLogprob | None = None   # its logprob entry (llama-server lists it)
        self._t_start = self._t_prompt_done = time.perf_counter()
        self.n_draft = self.n_draft_accepted = 0   # speculative decoding's counts, set by the loop

    def prompt_done(self, now: float | None = None) -> None:
        """The prompt is evaluated (at ``now``, a ``time.perf_counter()`` value; default: now)."""
        self._t_prompt_done = time.perf_counter() if now is None else now

    def stop(self, reason: StopReason) -> None:
        """The loop ends the sequence (cancelled, no room in its context); it replaces any reason."""
        self.reason = reason

    def take(self, token: int, piece: bytes, index: int = -1) -> GenerationChunk:
        """A generated token (not an end token) and its bytes: its chunk. ``index``: the logits row
        it was sampled from (read with logprobs). Sets ``reason`` when it ends the sequence: a stop
        string, ``max_tokens``, the room in the context. Not to be called once ``reason`` is set."""
        text, stopped = self._feed_stops(self._feed_utf8(piece))
        n = self.n_generated = self.n_generated + 1
        if stopped:
            self.reason = _STOP_STRING
        elif n >= self._bound:
            self.reason = _MAX_TOKENS if n >= self._limit else _CONTEXT_FULL
        entry = None
        if self._reader is not None:
            with self._logits(index) as row:
                entry = self._reader.read(row, token)
        return GenerationChunk(text, token, None, None, None, None, entry, not text and self._utf8.pending_bytes > 0)

    def end(self, token: int, piece: bytes = b"", index: int = -1) -> None:
        """The model's end-of-generation token ended the sequence. ``piece``: its text when it is
        rendered as text (a preserved token; render_special), b"" otherwise: it goes through UTF-8
        and the stop strings like any text (a stop string in it makes the reason STOP_STRING) and
        ends the final chunk's text. With logprobs its entry goes on the final chunk."""
        self.end_token = token
        self.reason = _EOG
        if piece:
            self._end_text, stopped = self._feed_stops(self._feed_utf8(piece))
            if stopped:
                self.reason = _STOP_STRING
        if self._reader is not None:
            with self._logits(index) as row:
                self._end_entry = self._reader.read(row, token)

    def take_run(self, tokens: Sequence[int], pieces: Sequence[bytes],
                 indices: Sequence[int] | None = None) -> tuple[list[GenerationChunk], int]:
        """Several accepted tokens at once (e.g. verified draft tokens), with their pieces and logits
        rows: exactly what ``take`` / ``end`` one by one give. Returns the chunks and how many tokens
        were taken: a token that ends the sequence (a stop string, a limit, an end token, which gets
        no chunk) is the last taken; the caller drops the rest (and trims its KV cache to match)."""
        if len(pieces) != len(tokens) or (indices is not None and len(indices) != len(tokens)):
            raise LlamaInferenceException(
                f"a run of {len(tokens)} tokens needs as many pieces ({len(pieces)}) and logits rows"
                f" ({len(indices) if indices is not None else 'none'})",
                {"n_tokens": len(tokens), "n_pieces": len(pieces)},
            )
        is_end = self._is_end
        if is_end is None:
            raise LlamaInferenceException("take_run needs is_end (which tokens end generation)")
        chunks: list[GenerationChunk] = []
        taken = 0
        take = self.take
        for i, token in enumerate(tokens):
            if self.reason is not None:
                break
            taken += 1
            index = -1 if indices is None else indices[i]
            if is_end(token):
                self.end(token, pieces[i], index)
                break
            chunks.append(take(token, pieces[i], index))
        return chunks, taken

    def finish(self) -> GenerationChunk:
        """The final chunk: the end token's text and, unless a stop string ended the sequence, what
        UTF-8 and the stop strings still held; the reason, the timings, the stop string, the end
        token and its logprob entry."""
        reason = self.reason
        if reason is None:
            raise LlamaStateException("the sequence has not ended: no final chunk yet")
        stops = self._stops
        if reason is _STOP_STRING:
            tail, matched = self._end_text, stops.matched
        else:
            tail, matched = self._end_text + stops.feed(self._utf8.flush())[0] + stops.flush(), None
        t_done = self._t_prompt_done
        timings = Timings(self._n_prompt, self.n_generated, (t_done - self._t_start) * 1e3,
                          (time.perf_counter() - t_done) * 1e3, self._n_cached, self.n_draft, self.n_draft_accepted)
        return GenerationChunk(tail, None, reason, timings, matched, self.end_token, self._end_entry)
