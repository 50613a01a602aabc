"""``POST /v1/completions``: raw prompts (text, token ids, or both mixed; several give several choices)
on the engine, in OpenAI's shape as llama-server answers it (one event per token, streamed; or the
whole text with its logprobs and usage). ``logprobs`` is read as ``n_probs``; ``echo`` is taken and
ignored, as at the pin."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...engine.chat_completion import completion_id
from ...engine.chat_types import system_fingerprint
from ..http.body import json_body
from ..http.errors import exception_response
from ..models.state import state_of
from ..serving.lora import with_lora
from ..serving.raw import PromptRun, prompt_runs, run_streamed, run_whole
from .wire import CompletionBody, merged, read_completion

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_completion), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    body = CompletionBody("cmpl-" + completion_id()[len("chatcmpl-"):], int(time.time()), state.model_name,
                          system_fingerprint())
    tokenize = state.engine.tokenize
    runs = prompt_runs(state, call, lora)

    if not call.stream:
        results = await run_whole(request, runs, lambda run, chunks: body.whole(chunks, tokenize, run.index))
        return results if isinstance(results, Response) else JSONResponse(merged(results))

    def render(run: PromptRun) -> Any:
        return lambda chunk: body.events(chunk, run.index)

    # a prompt after the first begins with llama-server's empty "start" result: an event `null`
    return await run_streamed(runs, render, between=[None])
