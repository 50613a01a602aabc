"""``POST /v1/messages`` (Anthropic's Messages API) and ``POST /v1/messages/count_tokens``, as
llama-server answers them: the body becomes a chat request (``messages.wire``), runs on the
chat path (``serving.chat``), and is answered as a ``message`` or streamed as Anthropic's events
(``messages.stream``). Errors keep llama-server's OpenAI shape, as it does on these routes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...json_types import Json
from ..http.body import json_body
from ..http.errors import exception_response
from ..models.state import state_of
from ..serving.chat import answer_chat
from ..serving.lora import with_lora
from ..serving.tokens import count_chat_prompt
from .stream import ANTHROPIC_FRAMING, AnthropicEvents
from .wire import message_json, read_messages

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_messages), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    renderer: list[AnthropicEvents] = []

    def whole(completion: Any, stream: Any) -> Json:
        return message_json(completion, stream.id, state.model_name, stream.stop_string)

    def render(chunk: Any, stream: Any) -> Iterable[Json]:
        if not renderer:
            renderer.append(AnthropicEvents(stream, state.model_name))
        return renderer[0].render(chunk)

    return await answer_chat(request, call, whole, render, framing=ANTHROPIC_FRAMING, lora=lora)


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read_messages, state.defaults)
        n_tokens = await asyncio.to_thread(count_chat_prompt, state.engine, call.request,
                                           state.settings.max_tokenize_tokens)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"input_tokens": n_tokens})
