"""The raw path: a raw completion's prompts run on the worker, for every route that takes raw prompts
(``/v1/completions``, ``/completion``, ``/completions``, ``/infill``).

    runs = [PromptRun(state, make_ids, params) for ...]
    results = await run_whole(request, runs, whole)            # not streamed: one object per prompt
    return await run_streamed(runs, render, between=..., done=...)   # or an HTTP error response

The prompts run one after another, in order (llama-server with one slot does the same; with
several it would interleave their events): the next is submitted when the one before has ended.
Each prompt is tokenized and checked on the worker (it may be megabytes); its ids and its text
(special tokens rendered: the native shape's ``prompt``) are kept for the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ...json_types import Json
from ..http.errors import RequestError, exception_response
from ..http.sse import OPENAI_FRAMING, Framing, event_stream, first_item, run_to_end
from ..models.gateway_metrics import adapter_names
from ..models.state import ServerState
from ..runners.job import Job
from ..wire.prompts import check_prompt, prompt_tokens
from .lora import request_scales
from .placement import placement
from .tokens import bounded_tokenizer

__all__ = ["PromptRun", "prompt_runs", "run_streamed", "run_whole"]


class PromptRun:
    """One prompt of a request: ``make_ids()`` (on the worker) gives its ids, ``start()`` submits it."""

    def __init__(self, state: ServerState, index: int, make_ids: Callable[[], list[int]], params: Any, *,
                 stream_mode: bool = False, lora: dict[int, float] | None = None, id_slot: int = -1) -> None:
        self.state = state
        self.index = index
        self.make_ids = make_ids
        self.params = params
        self.stream_mode = stream_mode
        self.lora = lora or {}   # the request's adapter scales (its `lora` field; none: the server's)
        self.scales = request_scales(state.loras, self.lora)
        self.id_slot = id_slot   # the slot it asks for (-1: any)
        self.ids: list[int] = []
        self.text = ""
        self.stream: Any = None

    @property
    def slot_id(self) -> int:
        """The slot it ran in (the engine has one, 0)."""
        return int(getattr(self.stream, "slot_id", 0))

    def _begin(self, backend: Any) -> Any:   # on the worker
        state = self.state
        engine = state.engine
        ids = check_prompt(self.make_ids(), engine.n_vocab)
        if not ids:   # llama-server answers an empty completion without a stop type (docs/design.md, caveats)
            raise RequestError("the prompt is empty: there is nothing to complete")
        self.ids, self.text = ids, engine.detokenize(ids, render_special=True)
        stream = backend.generate(ids, self.params, **placement(backend, state.loras, self.scales, self.id_slot))
        self.stream = stream
        state.slot_tasks.begin(stream, self.params, stream_mode=self.stream_mode,
                               reasoning_format=state.settings.reasoning_format, lora=sorted(self.lora.items()),
                               n_prompt=len(ids))
        return stream

    def start(self) -> Job:
        job = self.state.worker.submit(self._begin)
        self.state.metrics.adapters.note(job, adapter_names(self.state.loras, self.scales))
        return job

    def record(self, last: Any) -> None:
        """The prompt's counts in ``/metrics``."""
        t = last.timings
        self.state.metrics.record(t.n_prompt, t.prompt_ms, t.n_generated + int(last.end_token is not None),
                                  t.decode_ms, t.n_cached)


def prompt_runs(state: ServerState, call: Any, lora: dict[int, float] | None = None) -> list[PromptRun]:
    """A run for each of a ``CompletionCall``'s prompts."""
    tokenize = bounded_tokenizer(state.engine, state.engine.n_ctx, "context")   # no slot holds more

    def maker(prompt: Any) -> Callable[[], list[int]]:
        return lambda: prompt_tokens(prompt, tokenize)
    return [PromptRun(state, i, maker(p), call.params, stream_mode=call.stream, lora=lora, id_slot=call.id_slot)
            for i, p in enumerate(call.prompts)]


async def run_whole(request: Request, runs: list[PromptRun],
                    whole: Callable[[PromptRun, list[Any]], Json]) -> list[Json] | Response:
    """Every prompt run to its end: ``whole(run, chunks)`` each, or the error response of the first
    that fails (the prompts after it never start)."""
    results = []
    for run in runs:
        chunks: list[Any] = []
        try:
            await run_to_end(run.start(), request, chunks.append)
        except BaseException as exc:
            return exception_response(exc)
        run.record(chunks[-1])
        results.append(whole(run, chunks))
    return results


async def run_streamed(runs: list[PromptRun], render: Callable[[PromptRun], Callable[[Any], list[Json]]], *,
                       between: Iterable[Json] = (), framing: Framing = OPENAI_FRAMING) -> Response:
    """The prompts' events, ``render(run)`` giving a prompt's renderer; an error before the first
    event is the HTTP answer, a later one an error event."""
    def renderer(run: PromptRun) -> Callable[[Any], list[Json]]:
        inner = render(run)

        def events(chunk: Any) -> list[Json]:
            if chunk.stop_reason is not None:
                run.record(chunk)
            return inner(chunk)
        return events

    job = runs[0].start()
    try:
        first = await first_item(job)
    except BaseException as exc:
        return exception_response(exc)

    def starter(run: PromptRun) -> Callable[[], tuple[Job, Callable[[Any], list[Json]]]]:
        return lambda: (run.start(), renderer(run))

    return event_stream(job, first, renderer(runs[0]), framing, more=[starter(r) for r in runs[1:]],
                        between=between)
