"""Templates and tokens: ``/apply-template`` (llama-server's), ``/template-details`` (llamact's: what
the template rendered, with its family, format, grammar and stops), ``/tokenize``, ``/detokenize``.

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

from ...errors import LlamaInferenceException, LlamaTokenLimitException
from ..protocol import RequestError, exception_response, read_chat
from ..state import state_of
from .body import json_body

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
    return JSONResponse({
        "prompt": result.prompt, "family": result.family, "format": result.format,
        "generation_prompt": result.generation_prompt, "grammar": result.grammar,
        "grammar_lazy": result.grammar_lazy, "grammar_triggers": [t.value for t in result.grammar_triggers],
        "preserved_tokens": list(result.preserved_tokens), "additional_stops": list(result.additional_stops),
        "thinking_start_tag": result.thinking_start_tag, "thinking_end_tags": list(result.thinking_end_tags),
    })


def _check_count(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise RequestError(f"{what} {n} tokens, more than the server's limit of {limit} (--max-tokenize-tokens)")


def _tokens(engine: Any, body: Any, limit: int) -> Any:
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, str):
        raise RequestError("'content' must be a string")
    try:   # the limit counted as it tokenizes: a huge text is refused before all of it is tokenized
        tokens = engine.tokenize(content, add_special=bool(body.get("add_special", False)),
                                 parse_special=bool(body.get("parse_special", True)), limit=limit)
    except LlamaTokenLimitException as exc:   # before its pieces, ten times the memory
        what = "'content' is" if exc.details["exact"] else "'content' is at least"
        _check_count(exc.details["at_least"], limit, what)
        raise
    except LlamaInferenceException as exc:   # text llama.cpp cannot take (a lone surrogate)
        raise RequestError(f"'content': {exc}") from None
    if not body.get("with_pieces", False):
        return {"tokens": tokens}
    out = []
    for token in tokens:
        piece = engine.token_piece(token)
        try:
            out.append({"id": token, "piece": piece.decode("utf-8")})
        except UnicodeDecodeError:   # part of a character: llama-server lists the bytes
            out.append({"id": token, "piece": list(piece)})
    return {"tokens": out}


def _text(engine: Any, body: Any, limit: int) -> Any:
    tokens = body.get("tokens", []) if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        raise RequestError("'tokens' must be a list of token ids")
    _check_count(len(tokens), limit, "'tokens' holds")
    try:
        return {"content": engine.detokenize(tokens)}
    except LlamaInferenceException as exc:   # an id outside the vocabulary
        raise RequestError(f"'tokens': {exc}") from None


def _answer(work: Any, request: Request, body: Any) -> JSONResponse:
    state = state_of(request)   # the answer made here too: serialising a million ids takes a while
    return JSONResponse(work(state.engine, body, state.settings.max_tokenize_tokens))


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    try:
        return await asyncio.to_thread(_answer, _tokens, request, await json_body(request))
    except Exception as exc:
        return exception_response(exc)


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    try:
        return await asyncio.to_thread(_answer, _text, request, await json_body(request))
    except Exception as exc:
        return exception_response(exc)
