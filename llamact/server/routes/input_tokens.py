"""``POST /v1/responses/input_tokens`` and ``/v1/chat/completions/input_tokens`` (and the paths
without ``/v1``): how many tokens the request's rendered prompt is, as llama-server counts them
(``handle_count_tokens``: the template applied, the prompt tokenized with the special tokens added
and parsed), answered ``{"input_tokens": N, "object": "response.input_tokens"}`` on both routes.

The body is read as the route's generation body is (``read_chat``, or ``read_responses`` through its
chat body), so a request this refuses would be refused there too; rendering and tokenizing run on a
thread, as ``/apply-template`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...errors import LlamaInferenceException, LlamaMediaException
from ..prompts import count_chat_prompt
from ..protocol import RequestError, exception_response, read_chat
from ..responses_api import read_responses
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


def _count(engine: Any, request: Any, limit: int) -> int:
    try:   # bounded: a count of a huge prompt must not hold a gigabyte in llama.cpp's tokenizer
        return count_chat_prompt(engine, request, limit)
    except LlamaMediaException:
        raise
    except LlamaInferenceException as exc:   # text llama.cpp cannot take (a lone surrogate)
        raise RequestError(f"the rendered prompt: {exc}") from None


async def _answer(request: Request, read: Callable[..., Any]) -> Response:
    state = state_of(request)
    try:
        call = await json_body(request, read, state.defaults)
        n_tokens = await asyncio.to_thread(_count, state.engine, call.request, state.settings.max_tokenize_tokens)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"input_tokens": n_tokens, "object": "response.input_tokens"})


@router.post("/v1/responses/input_tokens")
@router.post("/responses/input_tokens")
async def responses_input_tokens(request: Request) -> Response:
    return await _answer(request, read_responses)


@router.post("/v1/chat/completions/input_tokens")
@router.post("/chat/completions/input_tokens")
async def chat_input_tokens(request: Request) -> Response:
    return await _answer(request, read_chat)
