"""The token loop: prompt in, text chunks out, with the reason generation stopped.

    generate(context, sampler, prompt_tokens, max_tokens, stop, ...)   an iterator of GenerationChunk

What enters: a context (sequence 0, ``n_past`` tokens already in it), a sampler and the prompt's
remaining token ids. What leaves: one ``GenerationChunk`` per generated token, then a final chunk
with the stop reason and timings (the sequence's rules -- text, stop strings, limits, end token,
timings, logprobs -- are ``decode.SequenceDecoder``'s, shared with the batched slots). Raises
``LlamaArgumentException`` (a request error) for an empty prompt or a bad ``max_tokens``,
``LlamaContextException`` when the prompt does not fit, and what the native calls raise while it runs.

Per generated token the loop makes one native call (``TokenStepper.step``: decode the previous
token, sample, end-of-generation check, text piece) and hands the piece to the decoder, which
yields its chunk. Nothing else happens per token: no re-tokenization, no logits copies, no string
re-scanning beyond the stop strings' length.

``StopReason``, ``Timings`` and ``GenerationChunk`` live in ``decode`` and are importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import LlamaArgumentException, LlamaContextException
from ..native.context import Context
from ..native.guided import GuidedSampler
from ..native.sampler import SamplerChain
from ..native.stepper import STEP_CANCELLED, STEP_CONTEXT_FULL, STEP_EOG, TokenStepper
from .decode import GenerationChunk, SequenceDecoder, StopReason, Timings
from .logprobs import LogprobReader, TokenLogprob
from .media import MediaPrompt
from .speculative.loop import speculative_steps
from .speculative.speculator import SequenceSpeculation

__all__ = ["GenerationChunk", "GenerationResult", "LogitsProcessor", "StopReason", "Timings", "generate"]

# f(token_ids, logits) -> new logits or None: runs before the sampler chain on the native row
# (changing it in place), or returns an array to copy into it. token_ids: every token in the
# sequence so far (prompt and generated), an int32 view valid during the call.
LogitsProcessor = Callable[[np.ndarray, np.ndarray], np.ndarray | None]


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
    media: MediaPrompt | None = None,
    speculation: SequenceSpeculation | None = None,
) -> Iterator[GenerationChunk]:
    """Decode ``prompt_tokens`` (after ``n_past`` tokens already in the context's sequence 0) and
    generate until end-of-generation, a stop string, ``max_tokens`` (-1: no limit) or a full context.

    ``top_logprobs`` (None: off) gives each chunk its token's logprob and that many alternatives
    (``logprobs``). ``processors`` run on the logits before each sampling; they see the token ids
    ``past_tokens`` (the ``n_past`` cached ones), the prompt and what was generated (a medium's
    positions hold its negative key). ``media`` is the whole prompt's media (``engine.media``): its
    media among ``prompt_tokens`` (keys from index ``n_past`` on) are evaluated between the text.
    ``speculation`` (``speculative.Speculator.sequence``; not with ``processors`` or ``media``) drafts
    tokens that the target verifies.
    """
    if not prompt_tokens:
        raise LlamaArgumentException("the prompt is empty: give at least one token")
    if media is not None and media.spans and media.spans[-1].end == len(media.keys):
        raise LlamaArgumentException("a prompt with media must end with text after its last medium")
    prompt = list(prompt_tokens) if media is not None else context.model.vocab.token_ids(prompt_tokens)
    n_ctx = context.n_ctx
    if n_past + len(prompt_tokens) > n_ctx:
        raise LlamaContextException(
            f"the prompt ({len(prompt_tokens)} tokens) does not fit the context ({n_ctx} tokens"
            f"{f', {n_past} in use' if n_past else ''}); use a larger n_ctx or a shorter prompt",
            {"n_prompt": len(prompt_tokens), "n_ctx": n_ctx, "n_past": n_past},
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < -1:
        raise LlamaArgumentException(f"max_tokens must be -1 or a non-negative integer, got {max_tokens!r}")

    stepper = TokenStepper(context, sampler, render_special)
    reader = LogprobReader(context.model.vocab, top_logprobs) if top_logprobs is not None else None
    history = _History(context, [*past_tokens, *prompt], processors) if processors else None
    return _token_loop(stepper, prompt, n_ctx, max_tokens, stop, n_past, reader, history, media,
                       None if processors or media is not None else speculation)


def _prefill(stepper: TokenStepper, prompt: list[int], n_past: int, media: MediaPrompt | None) -> bool:
    """Decode the prompt's keys from index ``n_past`` on: text in batches, each medium through its
    projector. False when an abort request stopped it."""
    if media is None:
        return stepper.prefill(prompt)
    i = 0
    while i < len(prompt):
        index = n_past + i
        span = media.span_at(index)
        if span is not None:
            if not media.evaluate(stepper.context, index):
                return False
            i += span.n_tokens
            continue
        end = min(media.next_media(index), n_past + len(prompt)) - n_past
        if not stepper.prefill(prompt[i:end], media.position(index)):
            return False
        i = end
    return True


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
    reader: LogprobReader | None = None, history: _History | None = None, media: MediaPrompt | None = None,
    speculation: SequenceSpeculation | None = None,
) -> Iterator[GenerationChunk]:
    context = stepper.context
    # room: a sampled token takes a cell only when the next step decodes it, so the context holds
    # n_ctx - (n_past + prompt) + 1 generated tokens, the last of them never decoded
    room = n_ctx - (n_past + len(prompt_tokens)) + 1
    decoder = SequenceDecoder(stop, max_tokens, n_ctx, room, len(prompt_tokens), n_past, logprobs=reader,
                              logits=context.borrow_logits, is_end=context.model.vocab.is_eog)
    if not _prefill(stepper, prompt_tokens, n_past, media):
        decoder.stop(StopReason.CANCELLED)
    if media is not None:   # generated tokens follow the prompt's last position (M-RoPE media shift it)
        stepper.set_position(media.position(n_past + len(prompt_tokens)))
    decoder.prompt_done()
    if speculation is not None:   # drafts verified in batches: engine/speculative/loop.py
        try:
            yield from speculative_steps(stepper, decoder, speculation, n_ctx=n_ctx, max_tokens=max_tokens,
                                         logprobs=reader is not None)
        except GeneratorExit:
            return
        yield decoder.finish()
        return

    step = stepper.step
    if history is not None:
        process, step_after = history.process, stepper.step_after

        def step() -> int:
            return step_after(process)
    take = decoder.take

    try:
        while decoder.reason is None:
            token = step()
            if token < 0:
                if token == STEP_EOG:
                    end_token = stepper.end_token
                    assert end_token is not None   # STEP_EOG sets it
                    decoder.end(end_token, stepper.piece)
                else:
                    decoder.stop(_STOPS[token])
                break
            if history is not None:
                history.append(token)
            yield take(token, stepper.piece)
    except GeneratorExit:
        return
    yield decoder.finish()


_STOPS = {STEP_EOG: StopReason.EOG, STEP_CANCELLED: StopReason.CANCELLED, STEP_CONTEXT_FULL: StopReason.CONTEXT_FULL}
