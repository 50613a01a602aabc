"""``POST /v1/completions``: a raw prompt (text or token ids) on the engine, as llama-server answers it
(one event per token, streamed; or the whole text with its logprobs and usage)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...engine.chat_completion import completion_id
from ...engine.chat_types import system_fingerprint
from ..lora_control import ensure_scales, request_scales, with_lora
from ..protocol import CompletionBody, RequestError, exception_response, read_completion
from ..sse import event_stream, first_item, run_to_end
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


def _check_prompt(prompt: str | list[int], n_vocab: int) -> None:
    """What llama.cpp cannot take is the request's error (400), not the generation's (500)."""
    if isinstance(prompt, list):
        if not 0 <= min(prompt) <= max(prompt) < n_vocab:
            raise RequestError(f"'prompt' holds a token id outside this model's vocabulary (0 to {n_vocab - 1})")
        return
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(f"'prompt' holds a lone surrogate ({prompt[exc.start:exc.end]!r}) at position {exc.start}, "
                           "which is not Unicode text") from None


@router.post("/v1/completions")
@router.post("/completions")
async def completions(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_completion), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    body = CompletionBody("cmpl-" + completion_id()[len("chatcmpl-"):], int(time.time()), state.model_name,
                          system_fingerprint())
    n_vocab = state.engine.n_vocab

    loras = state.loras
    scales = request_scales(loras, lora)

    def start(backend: Any) -> Any:   # on the worker: the prompt checked there (it may be megabytes)
        _check_prompt(call.prompt, n_vocab)
        ensure_scales(backend, loras, scales)
        stream = backend.generate(call.prompt, call.params)
        state.slot_tasks.begin(stream, call.params, stream_mode=call.stream,
                               reasoning_format=state.settings.reasoning_format, lora=sorted(lora.items()))
        return stream

    job = state.worker.submit(start)

    def record(last: Any) -> None:
        t = last.timings
        state.metrics.record(t.n_prompt, t.prompt_ms, t.n_generated + int(last.end_token is not None), t.decode_ms,
                             t.n_cached)

    if not call.stream:
        chunks: list[Any] = []
        try:
            await run_to_end(job, request, chunks.append)
        except BaseException as exc:
            return exception_response(exc)
        record(chunks[-1])
        return JSONResponse(body.whole(chunks, state.engine.tokenize))

    try:
        first = await first_item(job)
    except BaseException as exc:
        return exception_response(exc)

    def render(chunk: Any) -> list[Any]:
        if chunk.stop_reason is not None:
            record(chunk)
        return body.events(chunk)

    return event_stream(job, first, render)
