"""llama-server's own completion routes, in its own shape (``native.wire``):
``POST /completion`` and ``/completions`` (raw prompts: text, token ids, both mixed, several) and
``POST /infill`` (fill in the middle, for a model with FIM tokens; 501 otherwise, as upstream).

Streamed, the events are ``data: {...}`` lines with no ``[DONE]`` at the end (upstream's native
stream has none); a prompt after the first begins with an event ``null`` (upstream's empty start
result of its task). Not streamed, one prompt is one object, several a list.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..completions.wire import CompletionCall, read_completion
from ..http.body import json_body
from ..http.errors import error_response, exception_response
from ..http.sse import NATIVE_FRAMING
from ..models.state import ServerState, state_of
from ..serving.lora import parse_lora_field, with_lora
from ..serving.raw import PromptRun, prompt_runs, run_streamed, run_whole
from .wire import NativeCompletion, generation_settings, infill_tokens, missing_fim_tokens, read_infill

__all__ = ["router"]

router = APIRouter()


async def _answer(request: Request, state: ServerState, call: CompletionCall, runs: list[PromptRun]) -> Response:
    settings = generation_settings(call, state.defaults)
    tokenize = state.engine.tokenize

    def writer(run: PromptRun) -> NativeCompletion:
        return NativeCompletion(run.index, state.model_name, lambda: run.text, lambda: len(run.ids), settings,
                                return_tokens=call.return_tokens, timings_per_token=call.timings_per_token,
                                slot_id=lambda: run.slot_id)

    if not call.stream:
        results = await run_whole(request, runs, lambda run, chunks: writer(run).whole(chunks, tokenize))
        if isinstance(results, Response):
            return results
        return JSONResponse(results[0] if len(results) == 1 else results)
    return await run_streamed(runs, lambda run: writer(run).events, between=[None], framing=NATIVE_FRAMING)


@router.post("/completion")
@router.post("/completions")
async def completion(request: Request) -> Response:
    state = state_of(request)
    try:
        call, lora = await json_body(request, with_lora(read_completion), state.defaults)
    except Exception as exc:
        return exception_response(exc)
    runs = prompt_runs(state, call, lora)
    return await _answer(request, state, call, runs)


@router.post("/infill")
async def infill(request: Request) -> Response:
    state = state_of(request)
    engine = state.engine
    missing = missing_fim_tokens(engine)
    if missing:   # checked before the body is read, as upstream does
        return error_response(f"Infill is not supported by this model: {missing}", "not_supported_error", 501)
    try:
        body = await json_body(request, read_infill)
        call = read_completion({**body, "prompt": body.get("prompt", "")}, state.defaults)
        lora = parse_lora_field(body)
    except Exception as exc:
        return exception_response(exc)
    settings = state.settings
    n_ctx = engine.n_ctx // max(1, settings.parallel)

    prompt = body.get("prompt") or ""   # read_infill: a string

    def make_ids() -> list[int]:
        prompt_ids = engine.tokenize(prompt, add_special=False, parse_special=True) if prompt else []
        return infill_tokens(engine, body, n_batch=settings.batch_size, n_predict=settings.n_predict, n_ctx=n_ctx,
                             prompt_ids=prompt_ids)

    runs: list[Any] = [PromptRun(state, 0, make_ids, call.params, stream_mode=call.stream, lora=lora,
                                 id_slot=call.id_slot)]
    return await _answer(request, state, call, runs)
