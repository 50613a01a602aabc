"""``POST /v1/responses`` (and ``/responses``): an OpenAI Responses request, read as the chat body it
stands for (``server.responses_api``) and run on the chat path (``chat.answer_chat``); answered in
the Responses shape, whole or as llama-server's named events (``server.responses_events``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..lora_control import with_lora
from ..protocol import exception_response
from ..responses_api import read_responses
from ..responses_events import ResponseEvents, ResponseIds, response_json
from ..sse import RESPONSES_FRAMING
from ..state import state_of
from .body import json_body
from .chat import answer_chat

__all__ = ["router"]

Json = Any
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
