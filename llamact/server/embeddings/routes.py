"""Embeddings and reranking: ``/v1/embeddings`` (OpenAI's shape), ``/embeddings`` and ``/embedding``
(llama-server's own), ``/rerank``, ``/reranking``, ``/v1/rerank``, ``/v1/reranking``.

The engine embeds on a second context with embeddings on (``LlamaEngine.embed``), so a generation
server answers these routes without loading its model again: llamact serves them without
llama-server's ``--embeddings`` (which it accepts), where llama-server answers 501 (a deliberate
deviation, docs/design.md). The pooling is ``--pooling`` (else the model's own); OpenAI's route
refuses pooling none before reading the body, as upstream; reranking needs ``--reranking`` (pooling
rank). Each input is embedded in a decode of its own, as llama-server's slot takes one input at a
time, so the vectors are llama-server's (a batch of several texts moves them slightly: the caveat of
docs/design.md). With one slot the work runs on the engine's worker, between generations; with
``--parallel`` slots on a thread beside the scheduler's decodes (the embedding context is its own).
Requests take turns input by input (``_Turns``), so a one-input request is not held behind a
request of hundreds.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import weakref
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


def _pooling(state: ServerState) -> str:
    return state.engine.embedding_pooling(state.settings.embedding_pooling())


class _Turns:
    """Embedding work goes one input at a time, in the order the inputs asked (asyncio's lock wakes
    its waiters first come, first served): a request of 500 inputs and one of a single input
    interleave, as generations do, instead of the second waiting for the whole first (21.6 s)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[ServerState, asyncio.Lock] = weakref.WeakKeyDictionary()

    def of(self, state: ServerState) -> asyncio.Lock:
        lock = self._locks.get(state)
        if lock is None:
            lock = self._locks[state] = asyncio.Lock()
        return lock


_TURNS = _Turns()


Step = Callable[[], Any]   # the work of one input (one decode)


async def _on_engine(request: Request, state: ServerState, plan: Callable[[], tuple[int, list[Step]]]
                     ) -> tuple[int, list[Any]]:
    """``plan()`` -- tokenizing and checking every input: (tokens, one step per input) -- then each
    step, run where the engine can take it, one input at a time in turn with other requests'
    (``_Turns``): with one slot on the engine's worker, between the generations; with ``--parallel``
    slots on a thread beside the scheduler's decodes (the embedding context is its own). Returns the
    tokens and each step's value. No step runs once the client has gone away, so a request of
    thousands of inputs nobody waits for does not hold the engine."""
    stop = threading.Event()

    async def watch() -> None:
        while not stop.is_set():
            if await request.is_disconnected():
                stop.set()
                return
            await asyncio.sleep(DISCONNECT_POLL_S)

    async def run(step: Step) -> Any:
        async with _TURNS.of(state):
            if stop.is_set():
                raise RequestError("the client went away; the request was stopped")
            worker = state.worker
            if isinstance(worker, EngineWorker):
                def once(_engine: Any) -> Iterator[Any]:   # a stream of one item (a generator: it has close())
                    yield step()

                results: list[Any] = []
                await run_to_end(worker.submit(once), request, results.append)
                return results[0]
            return await asyncio.to_thread(step)

    watcher = asyncio.ensure_future(watch())
    try:
        n_tokens, steps = await run(plan)
        return n_tokens, [await run(step) for step in steps]
    finally:
        stop.set()
        watcher.cancel()


def _embed(call: EmbeddingCall, state: ServerState, pooling: str) -> tuple[int, list[Step]]:
    """Every input tokenized and checked before any is embedded, then one step per input: its vector
    (normalized unless per token)."""
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
    norm = call.normalize
    if isinstance(norm, RequestError):
        raise norm
    for tokens in inputs:
        check_tokens(tokens, engine.n_vocab, state.settings.ubatch_size, pooling)

    def one(tokens: list[int]) -> Any:
        if pooling == "none":
            return engine.embed_tokens([tokens], normalize=False)[0]
        out = engine.embed([tokens], normalize=False, pooling=state.settings.embedding_pooling())
        return normalized(out[0], norm)

    return sum(len(t) for t in inputs), [functools.partial(one, tokens) for tokens in inputs]


async def _embeddings(request: Request, oai: bool) -> Response:
    state = state_of(request)
    try:
        pooling = _pooling(state)
        if oai and pooling == "none":   # before the body, as llama-server
            raise RequestError(NO_EMBEDDINGS_OAI)
        call = await json_body(request, read_embeddings, oai, state.settings.embd_normalize)
        n_tokens, vectors = await _on_engine(request, state, lambda: _embed(call, state, pooling))
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


def _rerank(call: RerankCall, state: ServerState) -> tuple[int, list[Step]]:
    engine = state.engine
    documents = []
    for document in call.documents:
        tokens = engine.rerank_tokens(call.query, document)
        check_tokens(tokens, engine.n_vocab, state.settings.ubatch_size, "rank")
        if not tokens:
            raise RequestError(EMPTY_INPUT)
        documents.append(tokens)

    def score(tokens: list[int]) -> float:
        return float(engine.embed([tokens], normalize=False, pooling="rank")[0][0])

    return sum(len(t) for t in documents), [functools.partial(score, tokens) for tokens in documents]


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
        n_tokens, scores = await _on_engine(request, state, lambda: _rerank(call, state))
    except BaseException as exc:
        return exception_response(exc)
    return JSONResponse(rerank_body(call, state.model_name, scores, n_tokens))
