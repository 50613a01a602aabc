"""The token loop: prompt in, text chunks out, with the reason generation stopped.

Per generated token the loop makes one native call (``TokenStepper.step``: decode the previous
token, sample, end-of-generation check, text piece), feeds the piece to the UTF-8 stream and the
stop matcher, and yields a chunk. Nothing else happens per token: no re-tokenization, no logits
copies, no string re-scanning beyond the stop strings' length.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import LlamaContextException, LlamaInferenceException
from ..native.context import Context
from ..native.guided import GuidedSampler
from ..native.sampler import SamplerChain
from ..native.stepper import STEP_CANCELLED, STEP_CONTEXT_FULL, STEP_EOG, TokenStepper
from .detokenizer import Utf8Stream
from .logprobs import LogprobReader, TokenLogprob
from .stops import StopMatcher

# f(token_ids, logits) -> new logits or None: runs before the sampler chain on the native row
# (changing it in place), or returns an array to copy into it. token_ids: every token in the
# sequence so far (prompt and generated), an int32 view valid during the call.
LogitsProcessor = Callable[[np.ndarray, np.ndarray], np.ndarray | None]


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


@dataclass
class GenerationResult:
    text: str
    prompt_tokens: list[int]
    tokens: list[int]
    stop_reason: StopReason
    timings: Timings
    stop_string: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    logprobs: list[TokenLogprob] | None = None  # per generated token, with GenerationParams.logprobs


def generate(
    context: Context,
    sampler: SamplerChain | GuidedSampler,
    prompt_tokens: Sequence[int],
    max_tokens: int = 256,
    stop: Sequence[str] = (),
    render_special: bool = False,
    n_past: int = 0,
    top_logprobs: int | None = None,
    processors: Sequence[LogitsProcessor] = (),
    past_tokens: Sequence[int] = (),
) -> Iterator[GenerationChunk]:
    """Decode ``prompt_tokens`` (after ``n_past`` tokens already in the context's sequence 0) and
    generate until end-of-generation, a stop string, ``max_tokens`` (-1: no limit) or a full context.

    ``top_logprobs`` (None: off) gives each chunk its token's logprob and that many alternatives
    (``logprobs``). ``processors`` run on the logits before each sampling; they see the token ids
    ``past_tokens`` (the ``n_past`` cached ones), the prompt and what was generated.
    """
    if not prompt_tokens:
        raise LlamaInferenceException("the prompt is empty: give at least one token")
    prompt = context.model.vocab.token_ids(prompt_tokens)
    n_ctx = context.n_ctx
    if n_past + len(prompt_tokens) > n_ctx:
        raise LlamaContextException(
            f"the prompt ({len(prompt_tokens)} tokens) does not fit the context ({n_ctx} tokens"
            f"{f', {n_past} in use' if n_past else ''}); use a larger n_ctx or a shorter prompt",
            {"n_prompt": len(prompt_tokens), "n_ctx": n_ctx, "n_past": n_past},
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < -1:
        raise LlamaInferenceException(f"max_tokens must be -1 or a non-negative integer, got {max_tokens!r}")

    stepper = TokenStepper(context, sampler, render_special)
    reader = LogprobReader(context.model.vocab, top_logprobs) if top_logprobs is not None else None
    history = _History(context, [*past_tokens, *prompt], processors) if processors else None
    return _token_loop(stepper, prompt, n_ctx, max_tokens, stop, n_past, reader, history)


class _History:
    """The token ids a logits processor sees, and the call that runs the processors on the native row."""

    def __init__(self, context: Context, tokens: list[int], processors: Sequence[LogitsProcessor]) -> None:
        self._context = context
        self._ids = np.zeros(len(tokens) + context.n_ctx, dtype=np.int32)
        self._ids[: len(tokens)] = tokens
        self._n = len(tokens)
        self._processors = tuple(processors)

    def append(self, token: int) -> None:
        self._ids[self._n] = token
        self._n += 1

    def process(self) -> None:
        ids = self._ids[: self._n]
        ids.flags.writeable = False
        try:
            with self._context.borrow_logits() as row:
                for processor in self._processors:
                    out = processor(ids, row)
                    if out is not None and out is not row:
                        row[:] = out
        finally:
            ids.flags.writeable = True


def _token_loop(
    stepper: TokenStepper, prompt_tokens: list[int], n_ctx: int, max_tokens: int, stop: Sequence[str], n_past: int,
    reader: LogprobReader | None = None, history: _History | None = None,
) -> Iterator[GenerationChunk]:
    n_cached = n_past
    t0 = time.perf_counter()
    reason: StopReason | None = None if stepper.prefill(prompt_tokens) else StopReason.CANCELLED
    n_past += len(prompt_tokens)
    t1 = time.perf_counter()
    prompt_ms = (t1 - t0) * 1000

    step = stepper.step
    if history is not None:
        process, step_after = history.process, stepper.step_after

        def step() -> int:
            return step_after(process)
    utf8 = Utf8Stream()
    stops = StopMatcher(stop)
    feed_utf8, feed_stops = utf8.feed, stops.feed
    n_generated = 0
    limit = max_tokens if max_tokens >= 0 else n_ctx
    end_text = ""  # an end token's own text, when it is rendered (a preserved token; render_special)
    end_entry: TokenLogprob | None = None   # the end token's logprob entry (llama-server lists it)

    try:
        if limit == 0 and reason is None:
            reason = StopReason.MAX_TOKENS
        while reason is None:
            token = step()
            if token < 0:
                reason = _STOPS[token]
                if token == STEP_EOG:
                    if stepper.piece:
                        end_text, stopped = feed_stops(feed_utf8(stepper.piece))
                        reason = StopReason.STOP_STRING if stopped else reason
                    if reader is not None and stepper.end_token is not None:
                        with stepper.context.borrow_logits() as row:
                            end_entry = reader.read(row, stepper.end_token)
                break
            if n_generated:  # each step after the first decoded the previous token
                n_past += 1
            n_generated += 1
            text, stopped = feed_stops(feed_utf8(stepper.piece))
            if history is not None:
                history.append(token)
            if reader is None:
                yield GenerationChunk(text, token, incomplete=not text and utf8.pending_bytes > 0)
            else:
                with stepper.context.borrow_logits() as row:
                    entry = reader.read(row, token)
                yield GenerationChunk(text, token, logprob=entry, incomplete=not text and utf8.pending_bytes > 0)
            if stopped:
                reason = StopReason.STOP_STRING
            elif n_generated >= limit:
                reason = StopReason.MAX_TOKENS
            elif n_past >= n_ctx:
                reason = StopReason.CONTEXT_FULL
    except GeneratorExit:
        return
    tail = end_text + ("" if reason is StopReason.STOP_STRING else stops.feed(utf8.flush())[0] + stops.flush())
    yield GenerationChunk(
        tail, None, reason,
        Timings(len(prompt_tokens), n_generated, prompt_ms, (time.perf_counter() - t1) * 1000, n_cached),
        stop_string=stops.matched if reason is StopReason.STOP_STRING else None,
        end_token=stepper.end_token, logprob=end_entry,
    )


_STOPS = {STEP_EOG: StopReason.EOG, STEP_CANCELLED: StopReason.CANCELLED, STEP_CONTEXT_FULL: StopReason.CONTEXT_FULL}
