"""Continuous batching: several chat completions in one context, one ``llama_decode`` per step.

    scheduler = BatchScheduler(engine)          # engine loaded with ModelParams(n_seq_max=N): N slots
    stream = scheduler.create(messages, ...)    # create()'s arguments; a ChatStream, from any thread
    scheduler.close()

A scheduler thread owns the context. Each request waits in a queue until a slot (a sequence id of
the context) is free; it then joins between two steps: its prompt is evaluated into its sequence and
its first token sampled. Every step decodes one batch holding the last token of every active
sequence, then samples each sequence's next token from its own row of logits with its own sampler
(grammar, reasoning budget, preserved tokens: ``chat_sampler_config``), and hands the text to its
stream. A sequence leaves when it ends (end of generation, stop string, max_tokens, its share of the
context) or when its stream is closed; its slot is free for the next step.

The chunks each request receives are ``GenerationChunk`` values, as ``generate()`` makes them, so the
request's ``ChatStream`` (parser, deltas, usage) is the same as ``create()``'s. Differences from the
single-sequence path: no prompt cache (each prompt is evaluated whole: ``cached_tokens`` is 0), and a
sequence has ``n_ctx / n_seq_max`` positions. Logits depend slightly on how tokens are batched, so a
greedy answer may part from the single-sequence one at a near tie (as llama-server's slots do).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import LlamaContextException, LlamaInferenceException, LlamaStateException
from ..native.context import Batch
from ..native.guided import GuidedSampler
from ..native.sampler import Grammar
from .chat_completion import ChatStream
from .chat_sampling import chat_sampler_config
from .detokenizer import Utf8Stream
from .generator import GenerationChunk, StopReason, Timings
from .params import GenerationParams
from .sampling import sampler_specs
from .stops import StopMatcher

__all__ = ["BatchScheduler"]

_END = object()


@dataclass(eq=False)
class _Request:
    tokens: list[int]
    sampler: GuidedSampler
    stop_strings: tuple[str, ...]
    params: GenerationParams
    out: queue.Queue[Any] = field(default_factory=queue.Queue)
    cancelled: bool = False
    # set when it holds a slot
    seq: int = -1
    pos: int = 0
    last: int = -1
    n_generated: int = 0
    limit: int = 0
    utf8: Utf8Stream = field(default_factory=Utf8Stream)
    stops: StopMatcher | None = None
    t_start: float = 0.0
    t_prompt_done: float = 0.0


class SequenceStream:
    """One request's ``GenerationChunk`` values as the scheduler produces them (what ``ChatStream`` reads)."""

    def __init__(self, scheduler: BatchScheduler, request: _Request) -> None:
        self._scheduler = scheduler
        self._request = request
        self._done = False
        self.n_cached = 0

    def __iter__(self) -> SequenceStream:
        return self

    def __next__(self) -> GenerationChunk:
        if self._done:
            raise StopIteration
        item = self._request.out.get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if item.stop_reason is not None:
            self._done = True
        return item

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._scheduler._cancel(self._request)


class BatchScheduler:
    """The slots of one engine (see the module docstring)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.context = engine.context
        self.n_slots = engine.params.n_seq_max
        self.n_ctx_seq = self.context.n_ctx_seq
        self._vocab = engine.model.vocab
        self._cond = threading.Condition()
        self._waiting: deque[_Request] = deque()
        self._slots: list[_Request | None] = [None] * self.n_slots
        self._closed = False
        self._step_batch = Batch(self.context, self.n_slots, 1)
        self._prompt_batch = Batch(self.context, self.context.n_batch, 1)
        self.n_steps = 0     # decode steps with at least one sequence (a step of k sequences counts once)
        self.n_step_tokens = 0   # sequences decoded over all steps: n_step_tokens / n_steps is the mean batch
        self._thread = threading.Thread(target=self._loop, name="llamact-slots", daemon=True)
        self._thread.start()

    # -- the callers' side -----------------------------------------------------------------------

    @property
    def n_active(self) -> int:
        with self._cond:
            return sum(s is not None for s in self._slots)

    @property
    def n_waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def create(self, messages: Any, *, tools: Any = None, tool_choice: Any = "auto",
               parallel_tool_calls: bool = False, enable_thinking: bool = True, reasoning_format: str = "deepseek",
               response_format: Any = None, chat_template_kwargs: Any = None, reasoning_effort: str | None = None,
               continue_final_message: Any = False, custom_template: str | None = None,
               template_now: float | None = None, params: GenerationParams | None = None,
               thinking_budget_tokens: int | None = None, upstream_compat: bool = False) -> ChatStream:
        """``LlamaEngine.create()`` on a slot: the same arguments and the same stream."""
        params = params or GenerationParams()
        engine = self.engine
        result, parser, tokens = engine.chat_request(
            messages, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
            enable_thinking=enable_thinking, reasoning_format=reasoning_format, response_format=response_format,
            chat_template_kwargs=chat_template_kwargs, reasoning_effort=reasoning_effort,
            continue_final_message=continue_final_message, custom_template=custom_template,
            template_now=template_now, upstream_compat=upstream_compat)
        self._check_prompt(tokens)
        sampling = chat_sampler_config(engine, result, params, thinking_budget_tokens)
        request = self._submit(_Request(tokens, sampling.sampler, sampling.stops, params))
        return ChatStream(SequenceStream(self, request), result, parser, len(tokens), 0, model=engine.model.path.name)

    def generate(self, prompt: str | Sequence[int], params: GenerationParams | None = None) -> SequenceStream:
        """``LlamaEngine.generate()`` on a slot: a raw prompt (text is tokenized with special tokens parsed)."""
        params = params or GenerationParams()
        engine = self.engine
        tokens = engine.tokenize(prompt) if isinstance(prompt, str) else engine.model.vocab.token_ids(prompt)
        self._check_prompt(tokens)
        sampler = GuidedSampler(engine.model, sampler_specs(replace(params, grammar=None)),
                                grammar=Grammar(params.grammar) if params.grammar else None)
        return SequenceStream(self, self._submit(_Request(tokens, sampler, tuple(params.stop), params)))

    def _check_prompt(self, tokens: Sequence[int]) -> None:
        if not tokens:
            raise LlamaInferenceException("the prompt is empty: give at least one token")
        if len(tokens) >= self.n_ctx_seq:
            raise LlamaContextException(
                f"the prompt ({len(tokens)} tokens) does not fit a slot ({self.n_ctx_seq} tokens: the context "
                f"split between {self.n_slots} slots); use a larger n_ctx or a shorter prompt",
                {"n_prompt": len(tokens), "n_ctx_seq": self.n_ctx_seq})

    def _submit(self, request: _Request) -> _Request:
        with self._cond:
            if self._closed:
                request.sampler.close()
                raise LlamaStateException("the scheduler is closed")
            self._waiting.append(request)
            self._cond.notify()
        return request

    def _cancel(self, request: _Request) -> None:
        with self._cond:
            request.cancelled = True
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self._step_batch.close()
        self._prompt_batch.close()

    # -- the scheduler thread --------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._waiting and all(s is None for s in self._slots):
                    self._cond.wait()
                if self._closed:
                    pending = list(self._waiting) + [s for s in self._slots if s is not None]
                    self._waiting.clear()
                    break
                # leave: cancelled requests free their slots; join: waiting requests take free ones
                for i, slot in enumerate(self._slots):
                    if slot is not None and slot.cancelled:
                        self._release(i)
                joining: list[tuple[int, _Request]] = []
                while self._waiting and None in self._slots:
                    request = self._waiting.popleft()
                    if request.cancelled:
                        request.sampler.close()
                        continue
                    seq = self._slots.index(None)
                    self._slots[seq] = request
                    joining.append((seq, request))
            for seq, request in joining:
                self._join(seq, request)
            self._step()
        for request in pending:
            request.out.put(LlamaStateException("the server is shutting down"))
            request.sampler.close()

    def _release(self, seq: int) -> None:
        request = self._slots[seq]
        self._slots[seq] = None
        if request is not None:
            request.sampler.close()
        self.context.memory_seq_rm(seq, -1, -1)

    def _fail(self, seq: int, exc: BaseException) -> None:
        request = self._slots[seq]
        if request is not None:
            request.out.put(exc)
        with self._cond:
            self._release(seq)

    def _join(self, seq: int, request: _Request) -> None:
        """Evaluate the prompt into sequence ``seq`` and sample the first token."""
        request.seq, request.t_start = seq, time.perf_counter()
        request.stops = StopMatcher(request.stop_strings)
        limit = request.params.max_tokens
        request.limit = limit if limit >= 0 else self.n_ctx_seq
        try:
            self.context.memory_seq_rm(seq, -1, -1)
            tokens, n_batch, batch = request.tokens, self.context.n_batch, self._prompt_batch
            for start in range(0, len(tokens), n_batch):
                chunk = tokens[start:start + n_batch]
                batch.set_sequence(chunk, start, seq, logits_last=start + n_batch >= len(tokens))
                self.context.decode(batch)
            request.pos = len(tokens)
            request.t_prompt_done = time.perf_counter()
            if request.limit == 0:
                self._finish(request, StopReason.MAX_TOKENS)
                return
            self._take(request, request.sampler.sample(self.context, len(chunk) - 1))
        except BaseException as exc:
            self._fail(seq, exc)

    def _step(self) -> None:
        """One decode for every active sequence's last token, then each samples its next."""
        active = [(i, r) for i, r in enumerate(self._slots) if r is not None and not r.cancelled]
        if not active:
            return
        batch = self._step_batch
        batch.clear()
        for _seq, request in active:
            batch.add(request.last, request.pos, (request.seq,), logits=True)
        try:
            self.context.decode(batch)
        except BaseException as exc:
            for seq, _request in active:
                self._fail(seq, exc)
            return
        self.n_steps += 1
        self.n_step_tokens += len(active)
        for row, (seq, request) in enumerate(active):
            request.pos += 1
            try:
                self._take(request, request.sampler.sample(self.context, row))
            except BaseException as exc:
                self._fail(seq, exc)

    def _take(self, request: _Request, token: int) -> None:
        """A sampled token: its text to the stream, or the end of the request."""
        sampler = request.sampler
        assert request.stops is not None
        special = request.params.render_special or sampler.renders_as_text(token)
        if self._vocab.is_eog(token):
            end_text = self._vocab.token_to_piece(token, special=True) if sampler.renders_as_text(token) else b""
            text, stopped = request.stops.feed(request.utf8.feed(end_text)) if end_text else ("", False)
            self._finish(request, StopReason.STOP_STRING if stopped else StopReason.EOG, end_token=token,
                         end_text=text)
            return
        request.n_generated += 1
        request.last = token
        text, stopped = request.stops.feed(request.utf8.feed(self._vocab.token_to_piece(token, special=special)))
        request.out.put(GenerationChunk(text, token))
        if stopped:
            self._finish(request, StopReason.STOP_STRING)
        elif request.n_generated >= request.limit:
            self._finish(request, StopReason.MAX_TOKENS)
        elif request.pos + 1 >= self.n_ctx_seq:
            self._finish(request, StopReason.CONTEXT_FULL)

    def _finish(self, request: _Request, reason: StopReason, *, end_token: int | None = None,
                end_text: str = "") -> None:
        stops = request.stops
        assert stops is not None
        tail = end_text + ("" if reason is StopReason.STOP_STRING else stops.feed(request.utf8.flush())[0]
                           + stops.flush())
        now = time.perf_counter()
        timings = Timings(len(request.tokens), request.n_generated, (request.t_prompt_done - request.t_start) * 1e3,
                          (now - request.t_prompt_done) * 1e3, 0)
        request.out.put(GenerationChunk(tail, None, reason, timings,
                                        stop_string=stops.matched if reason is StopReason.STOP_STRING else None,
                                        end_token=end_token))
        with self._cond:
            self._release(request.seq)

