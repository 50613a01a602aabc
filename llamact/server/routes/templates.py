"""Templates and tokens: ``/apply-template`` (llama-server's), ``/template-details`` (llamact's: what
the template rendered, with its family, format, grammar and stops), ``/tokenize``, ``/detokenize``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..protocol import RequestError, error_response, exception_response, read_chat
from ..state import state_of
from .body import json_body

__all__ = ["router"]

router = APIRouter()


@router.post("/apply-template")
async def apply_template(request: Request) -> Response:
    state = state_of(request)
    try:
        result = state.engine.chat_template(read_chat(await json_body(request), state.defaults).request)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({"prompt": result.prompt})


@router.post("/template-details")
async def template_details(request: Request) -> Response:
    """What ``/apply-template`` renders, with the detected family, format, grammar and stops (the page's
    prompt panel)."""
    state = state_of(request)
    try:
        result = state.engine.chat_template(read_chat(await json_body(request), state.defaults).request)
    except Exception as exc:
        return exception_response(exc)
    return JSONResponse({
        "prompt": result.prompt, "family": result.family, "format": result.format,
        "generation_prompt": result.generation_prompt, "grammar": result.grammar,
        "grammar_lazy": result.grammar_lazy, "grammar_triggers": [t.value for t in result.grammar_triggers],
        "preserved_tokens": list(result.preserved_tokens), "additional_stops": list(result.additional_stops),
        "thinking_start_tag": result.thinking_start_tag, "thinking_end_tags": list(result.thinking_end_tags),
    })


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    engine = state_of(request).engine
    try:
        body = await json_body(request)
    except RequestError as exc:
        return exception_response(exc)
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, str):
        return error_response("'content' must be a string")
    tokens = engine.tokenize(content, add_special=bool(body.get("add_special", False)),
                             parse_special=bool(body.get("parse_special", True)))
    if not body.get("with_pieces", False):
        return JSONResponse({"tokens": tokens})
    out = []
    for token in tokens:
        piece = engine.token_piece(token)
        try:
            out.append({"id": token, "piece": piece.decode("utf-8")})
        except UnicodeDecodeError:   # part of a character: llama-server lists the bytes
            out.append({"id": token, "piece": list(piece)})
    return JSONResponse({"tokens": out})


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    engine = state_of(request).engine
    try:
        body = await json_body(request)
    except RequestError as exc:
        return exception_response(exc)
    tokens = body.get("tokens", []) if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return error_response("'tokens' must be a list of token ids")
    try:
        return JSONResponse({"content": engine.detokenize(tokens)})
    except Exception as exc:
        return exception_response(exc)
