"""The templates family, templates and tokens: ``/apply-template`` (llama-server's),
``/template-details`` (llamact's: what the template rendered, with its family, format, grammar and
stops), ``/tokenize``, ``/detokenize`` (their bodies and answers: ``templates.wire``).

Rendering, tokenizing and detokenizing run on a thread (``asyncio.to_thread``): a 20 MB text takes
seconds, and on the event loop it would stall every other client. The vocabulary is read-only, so
these calls run beside a generation as the workers' own tokenizing does. Their input is bounded by
the body limit (``--max-body-size``), their token lists by ``--max-tokenize-tokens``; the engine's
refusal of an input (a lone surrogate, an id outside the vocabulary) is the request's error, 400.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..chat.wire import read_chat
from ..http.body import json_body
from ..http.errors import exception_response
from ..models.state import state_of
from .wire import details_json, detokenize_json, tokenize_json

__all__ = ["router"]

router = APIRouter()


async def _rendered(request: Request) -> Any:
    state = state_of(request)
    call = await json_body(request, read_chat, state.defaults)
    return await asyncio.to_thread(state.engine.chat_template, call.request)


@router.post("/apply-template")
async def apply_template(request: Request) -> Response:
    try:
        result = await _rendered(request)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"prompt": result.prompt})


@router.post("/template-details")
async def template_details(request: Request) -> Response:
    """What ``/apply-template`` renders, with the detected family, format, grammar and stops (the page's
    prompt panel)."""
    try:
        result = await _rendered(request)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse(details_json(result))


def _answer(work: Any, request: Request, body: Any) -> JSONResponse:
    state = state_of(request)   # the answer made here too: serialising a million ids takes a while
    return JSONResponse(work(state.engine, body, state.settings.max_tokenize_tokens))


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    try:
        return await asyncio.to_thread(_answer, tokenize_json, request, await json_body(request))
    except Exception as exc:
        return exception_response(exc)


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    try:
        return await asyncio.to_thread(_answer, detokenize_json, request, await json_body(request))
    except Exception as exc:
        return exception_response(exc)
