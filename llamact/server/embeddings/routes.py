"""Embeddings and reranking: ``/v1/embeddings`` (OpenAI's shape), ``/embeddings`` and ``/embedding``
(llama-server's own), ``/rerank``, ``/reranking``, ``/v1/rerank``, ``/v1/reranking``.

The engine embeds on a second context with embeddings on (``LlamaEngine.embed``), so a generation
server answers these routes without loading its model again: llamact serves them without
llama-server's ``--embeddings`` (which it accepts), where llama-server answers 501 (a deliberate
deviation, docs/design.md). The pooling is ``--pooling`` (else the model's own); OpenAI's route
refuses pooling none before reading the body, as upstream; reranking needs ``--reranking`` (pooling
rank). Each input is embedded in a decode of its own, as llama-server's slot takes one input at a
time, so the vectors are llama-server's (a batch of several texts moves them slightly: the caveat of
docs/design.md). With one slot the work runs on the engine's worker, after the generation in
progress; with ``--parallel`` slots it runs on a thread beside the scheduler's decodes (the
embedding context is its own), one request at a time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..http.body import json_body
from ..http.errors import RequestError, error_response, exception_response
from ..http.sse import DISCONNECT_POLL_S, run_to_end
from ..models.state import ServerState, state_of
from ..runners.worker import EngineWorker
from ..serving.tokens import bounded_tokenizer
from .wire import (
    EMPTY_INPUT,
    NO_EMBEDDINGS_OAI,
    NO_RERANKING,
    EmbeddingCall,
    RerankCall,
    check_tokens,
    native_embeddings,
    normalized,
    oai_embeddings,
    prompt_tokens,
    read_embeddings,
    read_rerank,
    rerank_body,
)

__all__ = ["router"]

router = APIRouter()
_BESIDE_SLOTS = threading.Lock()   # with --parallel: one embedding request at a time on the engine


def _pooling(state: ServerState) -> str:
    return state.engine.embedding_pooling(state.settings.embedding_pooling())


async def _on_engine(request: Request, state: ServerState, work: Callable[[Any, threading.Event], Any]) -> Any:
    """``work(engine, stop)``'s value, run where the engine can take it (see the module docstring).
    ``stop`` is set when the client goes away: the work checks it between inputs, so a request of
    thousands of inputs nobody waits for any more does not hold the engine (one input is one decode)."""
    stop = threading.Event()

    async def watch() -> None:
        while not stop.is_set():
            if await request.is_disconnected():
                stop.set()
                return
            await asyncio.sleep(DISCONNECT_POLL_S)

    watcher = asyncio.ensure_future(watch())
    try:
        worker = state.worker
        if isinstance(worker, EngineWorker):
            def once(engine: Any) -> Iterator[Any]:
                yield work(engine, stop)

            results: list[Any] = []
            await run_to_end(worker.submit(once), request, results.append)
            return results[0]

        def beside_slots() -> Any:
            with _BESIDE_SLOTS:
                return work(state.engine, stop)

        return await asyncio.to_thread(beside_slots)
    finally:
        stop.set()
        watcher.cancel()


def _check_stop(stop: threading.Event) -> None:
    if stop.is_set():
        raise RequestError("the client went away; the request was stopped")


def _embed(call: EmbeddingCall, state: ServerState, pooling: str, stop: threading.Event) -> tuple[list[Any], int]:
    """On the engine: each input's vector (normalized unless per token) and the tokens evaluated."""
    engine = state.engine
    bounded = bounded_tokenizer(engine, state.settings.max_tokenize_tokens, "--max-tokenize-tokens")

    def tokenize(text: str, add_special: bool) -> list[int]:
        try:
            return bounded(text, add_special=add_special, parse_special=True)
        except RequestError:
            raise
        except Exception as exc:   # text llama.cpp cannot take (a lone surrogate)
            raise RequestError(f"'input': {exc}") from None

    inputs = [prompt_tokens(tokenize, p) for p in call.prompts]
    if any(not tokens for tokens in inputs):
        raise RequestError(EMPTY_INPUT)
    if isinstance(call.normalize, RequestError):
        raise call.normalize
    vectors = []
    for tokens in inputs:
        _check_stop(stop)
        check_tokens(tokens, engine.n_vocab, state.settings.ubatch_size, pooling)
        if pooling == "none":
            vectors.append(engine.embed_tokens([tokens], normalize=False)[0])
        else:
            out = engine.embed([tokens], normalize=False, pooling=state.settings.embedding_pooling())
            vectors.append(normalized(out[0], call.normalize))
    return vectors, sum(len(t) for t in inputs)


async def _embeddings(request: Request, oai: bool) -> Response:
    state = state_of(request)
    try:
        pooling = _pooling(state)
        if oai and pooling == "none":   # before the body, as llama-server
            raise RequestError(NO_EMBEDDINGS_OAI)
        call = await json_body(request, read_embeddings, oai, state.settings.embd_normalize)
        vectors, n_tokens = await _on_engine(request, state, lambda _engine, stop: _embed(call, state, pooling, stop))
    except BaseException as exc:
        return exception_response(exc)
    if call.oai:
        return JSONResponse(oai_embeddings(call, state.model_name, vectors, n_tokens))
    return JSONResponse(native_embeddings(vectors))


@router.post("/v1/embeddings")
async def embeddings_oai(request: Request) -> Response:
    return await _embeddings(request, oai=True)


@router.post("/embeddings")
@router.post("/embedding")
async def embeddings_native(request: Request) -> Response:
    return await _embeddings(request, oai=False)


def _rerank(call: RerankCall, state: ServerState, stop: threading.Event) -> tuple[list[float], int]:
    engine = state.engine
    scores, n_tokens = [], 0
    for document in call.documents:
        _check_stop(stop)
        tokens = engine.rerank_tokens(call.query, document)
        check_tokens(tokens, engine.n_vocab, state.settings.ubatch_size, "rank")
        if not tokens:
            raise RequestError(EMPTY_INPUT)
        scores.append(float(engine.embed([tokens], normalize=False, pooling="rank")[0][0]))
        n_tokens += len(tokens)
    return scores, n_tokens


@router.post("/rerank")
@router.post("/reranking")
@router.post("/v1/rerank")
@router.post("/v1/reranking")
async def rerank(request: Request) -> Response:
    state = state_of(request)
    if state.settings.embedding_pooling() != "rank":   # before the body, as llama-server
        return error_response(NO_RERANKING, "not_supported_error", 501)
    try:
        call = await json_body(request, read_rerank)
        scores, n_tokens = await _on_engine(request, state, lambda _engine, stop: _rerank(call, state, stop))
    except BaseException as exc:
        return exception_response(exc)
    return JSONResponse(rerank_body(call, state.model_name, scores, n_tokens))
