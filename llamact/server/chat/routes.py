"""``POST /v1/chat/completions`` (and ``/chat/completions``): a chat request on the chat path
(``serving.chat``), answered in OpenAI's chat shape -- whole (``ChatCompletion.to_openai``) or
streamed as llama-server streams it (``ChatChunk.to_openai`` events); and
``POST /v1/chat/completions/input_tokens`` (and without ``/v1``): the rendered prompt's token count,
as llama-server counts it (``handle_count_tokens``), ``{"input_tokens": N, "object":
"response.input_tokens"}``. The count reads the body as the generation route reads it, so a request
it refuses would be refused there too; rendering and tokenizing run on a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...engine.chat_types import system_fingerprint
from ..http.body import json_body
from ..http.errors import exception_response
from ..models.state import state_of
from ..serving.chat import answer_chat
from ..serving.lora import with_lora
from ..serving.tokens import count_input_tokens
from ..wire.logprobs import without_stop_entries
from .wire import read_chat

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/chat/completions")
@router.post("/chat/completions")
async def chat_completions(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_chat), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    fingerprint = system_fingerprint()

    def whole(completion: Any, stream: Any) -> Any:
        if completion.logprobs:
            completion = replace(completion, logprobs=without_stop_entries(
                completion.logprobs, stream.stop_string, state.engine.tokenize))
        return completion.to_openai(stream.id, state.model_name, stream.created)

    def render(chunk: Any, stream: Any) -> Iterable[Any]:
        return chunk.to_openai(stream.id, state.model_name, stream.created, fingerprint=fingerprint,
                               include_usage=call.include_usage)

    return await answer_chat(request, call, whole, render, lora=lora)


@router.post("/v1/chat/completions/input_tokens")
@router.post("/chat/completions/input_tokens")
async def chat_input_tokens(request: Request) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read_chat, state.defaults)
        n_tokens = await asyncio.to_thread(count_input_tokens, state.engine, call.request,
                                           state.settings.max_tokenize_tokens)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"input_tokens": n_tokens, "object": "response.input_tokens"})
