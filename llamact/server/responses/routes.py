"""``POST /v1/responses`` (and ``/responses``): an OpenAI Responses request, read as the chat body it
stands for (``responses.wire``) and run on the chat path (``serving.chat.answer_chat``); answered in
the Responses shape, whole or as llama-server's named events (``responses.stream``). And
``POST /v1/responses/input_tokens`` (and without ``/v1``): the rendered prompt's token count, as
llama-server counts it (``handle_count_tokens``), ``{"input_tokens": N, "object":
"response.input_tokens"}``; the body is read as the generation route reads it, so a request it
refuses would be refused there too; rendering and tokenizing run on a thread."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...json_types import Json
from ..http.body import json_body
from ..http.errors import exception_response
from ..http.sse import RESPONSES_FRAMING
from ..models.state import state_of
from ..serving.chat import answer_chat
from ..serving.lora import with_lora
from ..serving.tokens import count_input_tokens
from .stream import ResponseEvents
from .wire import ResponseIds, read_responses, response_json

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/responses")
@router.post("/responses")
async def responses(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_responses), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    ids = ResponseIds()
    events = ResponseEvents(ids, state.model_name)

    def whole(completion: Any, stream: Any) -> Json:
        return response_json(completion, ids, state.model_name)

    def render(chunk: Any, stream: Any) -> Iterable[Json]:
        return events.of(chunk, stream.message)

    # llama-server's named events, ending with the last one: no [DONE]
    return await answer_chat(request, call, whole, render, framing=RESPONSES_FRAMING, lora=lora)


@router.post("/v1/responses/input_tokens")
@router.post("/responses/input_tokens")
async def responses_input_tokens(request: Request) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read_responses, state.defaults)
        n_tokens = await asyncio.to_thread(count_input_tokens, state.engine, call.request,
                                           state.settings.max_tokenize_tokens)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"input_tokens": n_tokens, "object": "response.input_tokens"})
