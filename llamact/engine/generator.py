"""The token loop: prompt in, text chunks out, with the reason generation stopped.

Per generated token the loop makes four native calls (sample, is_eog, token_to_piece, decode)
through prototypes looked up once, feeds the piece to the UTF-8 stream and the stop matcher, and
yields a chunk. Nothing else happens per token: no re-tokenization, no logits copies, no string
re-scanning beyond the stop strings' length.
"""

from __future__ import annotations

import ctypes
import enum
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import LlamaContextException, LlamaInferenceException, LlamaStateException
from ..native import llama_h
from ..native._library import native
from ..native.context import Context
from ..native.llama_h import LLAMA_TOKEN_NULL
from ..native.sampler import SamplerChain
from ..native.shim import ErrorBuffer
from .detokenizer import Utf8Stream
from .stops import StopMatcher


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
    n_prompt: int
    n_generated: int
    prompt_ms: float
    decode_ms: float

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

    @property
    def finish_reason(self) -> str | None:
        return self.stop_reason.finish_reason if self.stop_reason else None


@dataclass
class GenerationResult:
    text: str
    prompt_tokens: list[int]
    tokens: list[int]
    stop_reason: StopReason
    timings: Timings
    stop_string: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def generate(
    context: Context,
    sampler: SamplerChain,
    prompt_tokens: Sequence[int],
    max_tokens: int = 256,
    stop: Sequence[str] = (),
    render_special: bool = False,
    n_past: int = 0,
) -> Iterator[GenerationChunk]:
    """Decode ``prompt_tokens`` (after ``n_past`` tokens already in the context's sequence 0) and
    generate until end-of-generation, a stop string, ``max_tokens`` (-1: no limit) or a full context.
    """
    n_vocab = context.model.vocab.n_tokens
    if not prompt_tokens:
        raise LlamaInferenceException("the prompt is empty: give at least one token")
    bad = next((t for t in prompt_tokens if not 0 <= t < n_vocab), None)
    if bad is not None:
        raise LlamaInferenceException(f"prompt token {bad} is outside the vocabulary (0..{n_vocab - 1})")
    n_ctx = context.n_ctx
    if n_past + len(prompt_tokens) > n_ctx:
        raise LlamaContextException(
            f"the prompt ({len(prompt_tokens)} tokens) does not fit the context ({n_ctx} tokens"
            f"{f', {n_past} in use' if n_past else ''}); use a larger n_ctx or a shorter prompt",
            {"n_prompt": len(prompt_tokens), "n_ctx": n_ctx, "n_past": n_past},
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < -1:
        raise LlamaInferenceException(f"max_tokens must be -1 or a non-negative integer, got {max_tokens!r}")

    return _token_loop(context, sampler, list(prompt_tokens), max_tokens, stop, render_special, n_past)


def _token_loop(
    context: Context,
    sampler: SamplerChain,
    prompt_tokens: list[int],
    max_tokens: int,
    stop: Sequence[str],
    render_special: bool,
    n_past: int,
) -> Iterator[GenerationChunk]:
    lib, shim_lib = context._lib, native().shim
    ctx_ptr, vocab_ptr, chain_ptr = context.ptr, context.model.vocab.ptr, sampler.ptr
    n_ctx = context.n_ctx
    err = ErrorBuffer()
    err_args = err.args
    decode = shim_lib.llamact_decode
    step = shim_lib.llamact_step
    to_piece = lib.llama_token_to_piece
    string_at = ctypes.string_at
    context._abort_flag.value = 0

    # Prompt, in batches of at most n_batch tokens (upstream requires it).
    t0 = time.perf_counter()
    n_batch = context.n_batch
    prompt = (llama_h.llama_token * len(prompt_tokens))(*prompt_tokens)
    token_size = ctypes.sizeof(llama_h.llama_token)
    base = ctypes.addressof(prompt)
    reason: StopReason | None = None
    for start in range(0, len(prompt_tokens), n_batch):
        count = min(n_batch, len(prompt_tokens) - start)
        chunk_ptr = ctypes.cast(base + start * token_size, ctypes.POINTER(llama_h.llama_token))
        rc = decode(ctx_ptr, lib.llama_batch_get_one(chunk_ptr, count), *err_args)
        if rc == 2:
            reason = StopReason.CANCELLED
            break
        if rc != 0:
            context._raise_decode_error(rc, err.message)
    n_past += len(prompt_tokens)
    t1 = time.perf_counter()
    prompt_ms = (t1 - t0) * 1000

    # Everything the per-token call takes, converted to ctypes once.
    piece_buf = ctypes.create_string_buffer(256)
    piece_len, eog, decode_rc = ctypes.c_int32(0), ctypes.c_int32(0), ctypes.c_int32(0)
    fixed_head = (ctypes.c_void_p(ctx_ptr), ctypes.c_void_p(chain_ptr), ctypes.c_void_p(vocab_ptr))
    fixed_tail = (
        ctypes.c_int32(int(sampler.greedy_only)), ctypes.c_int32(int(render_special)), piece_buf,
        ctypes.c_int32(256), ctypes.byref(piece_len), ctypes.byref(eog), ctypes.byref(decode_rc), *err_args,
    )
    utf8 = Utf8Stream()
    stops = StopMatcher(stop)
    feed_utf8, feed_stops = utf8.feed, stops.feed
    n_generated = 0
    limit = max_tokens if max_tokens >= 0 else n_ctx
    token = LLAMA_TOKEN_NULL  # the prompt is decoded: the first step only samples

    try:
        if limit == 0 and reason is None:
            reason = StopReason.MAX_TOKENS
        while reason is None:
            prev = token
            token = step(*fixed_head, prev, *fixed_tail)
            if token == LLAMA_TOKEN_NULL:
                rc = decode_rc.value
                if rc == 1:
                    reason = StopReason.CONTEXT_FULL
                elif rc == 2:
                    reason = StopReason.CANCELLED
                elif rc != 0:
                    context._raise_decode_error(rc, err.message)
                else:
                    raise sampler.abandon("a generation step", err.message)
                break
            if prev != LLAMA_TOKEN_NULL:
                n_past += 1
            if eog.value:
                reason = StopReason.EOG
                break
            n = piece_len.value
            if n < 0:  # pieces over 256 bytes are rare; fetch it whole
                big = ctypes.create_string_buffer(-n)
                n = to_piece(vocab_ptr, token, big, -n, 0, render_special)
                raw = string_at(big, n)
            else:
                raw = string_at(piece_buf, n)
            n_generated += 1
            text, stopped = feed_stops(feed_utf8(raw))
            if stopped:
                yield GenerationChunk(text, token)
                reason = StopReason.STOP_STRING
                break
            yield GenerationChunk(text, token)
            if n_generated >= limit:
                reason = StopReason.MAX_TOKENS
            elif n_past >= n_ctx:
                reason = StopReason.CONTEXT_FULL
            elif context._ptr is None or sampler._ptr is None:  # closed while the consumer held the stream
                raise LlamaStateException("the engine was closed while generating; the stream cannot continue")
    except GeneratorExit:
        return
    tail = "" if reason is StopReason.STOP_STRING else stops.feed(utf8.flush())[0] + stops.flush()
    yield GenerationChunk(
        tail, None, reason, Timings(len(prompt_tokens), n_generated, prompt_ms, (time.perf_counter() - t1) * 1000),
        stop_string=stops.matched if reason is StopReason.STOP_STRING else None,
    )
