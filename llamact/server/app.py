"""The HTTP side of ``llamact serve``: llama-server's routes over one ``LlamaEngine``.

    create_app(settings) -> FastAPI        the model loads in the background; /health answers 503 until then

Routes and shapes follow tools/server at the pin: ``/v1/chat/completions`` (and ``/chat/completions``)
streams ``ChatChunk.to_openai`` as server-sent events (``data: {...}`` then ``data: [DONE]``), or
answers ``ChatCompletion.to_openai``; ``/v1/completions`` (``/completions``) is the raw-prompt
endpoint; ``/v1/models``, ``/health``, ``/apply-template``, ``/tokenize``, ``/detokenize``,
``/props``, ``/metrics``. Errors are OpenAI's shape (``{"error": {"code", "message", "type"}}``), as
``format_error_response`` makes them. Generation runs on the engine (one request at a time) or, with
``--parallel N`` > 1, on a ``BatchScheduler``'s N slots (through an ``EngineWorker`` or a ``SlotRunner``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.datastructures import Headers

from ..engine import LlamaEngine
from ..engine.batched import BatchScheduler
from ..engine.chat_completion import completion_id
from ..engine.chat_types import system_fingerprint
from ..errors import LlamaContextException, LlamaException, LlamaUnsupportedException
from .metrics import Metrics
from .props import props_body
from .requests import RequestDefaults, RequestError, chat_request, completion_request
from .settings import ServerSettings
from .slots import SlotRunner
from .worker import EngineWorker, Job

Json = Any
log = logging.getLogger("llamact.server")

# llama-server's public endpoints, and its page (which asks for the key itself)
PUBLIC_PATHS = frozenset({"/health", "/v1/health", "/"})
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


# create() keywords that are not chat_template()'s (/apply-template and /template-details render only)
_GENERATION_ONLY = ("params", "thinking_budget_tokens", "reasoning_budget_message", "upstream_compat")
DISCONNECT_POLL_S = 0.25   # how often a non-streamed request checks that its client is still there


def error_body(message: str, kind: str, code: int) -> Json:
    return {"error": {"code": code, "message": message, "type": kind}}


def error_response(message: str, kind: str = "invalid_request_error", code: int = 400) -> JSONResponse:
    return JSONResponse(error_body(message, kind, code), status_code=code)


def exception_response(exc: BaseException) -> JSONResponse:
    """What llama-server answers for a request that failed: 400 for what the request asked, 500 otherwise."""
    if isinstance(exc, LlamaContextException):
        return error_response(str(exc), "exceed_context_size_error", 400)
    if isinstance(exc, LlamaUnsupportedException):
        return error_response(str(exc), "not_supported_error", 501)
    if isinstance(exc, LlamaException):
        return error_response(str(exc), "invalid_request_error", 400)
    log.exception("request failed", exc_info=exc)
    return error_response(f"{type(exc).__name__}: {exc}", "server_error", 500)


def _released_entry(chunk: Any) -> Json:
    """A raw completion's logprobs entry as llama-server writes it: the sampled token's ``token`` and
    ``bytes`` are the text its event released (a whole character for a token that completed one, ""
    while a stop string may be starting), its alternatives their own pieces."""
    entry = chunk.logprob.to_openai()
    entry["token"], entry["bytes"] = chunk.text, list(chunk.text.encode("utf-8"))
    return entry


def sse(data: Json) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


class ServerState:
    """The engine once loaded, its worker, and what /props and /metrics report."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.engine: LlamaEngine | None = None
        self.scheduler: BatchScheduler | None = None
        self.worker: EngineWorker | SlotRunner | None = None
        self.load_error: str | None = None
        self.on_load_error: Callable[[], None] | None = None   # `llamact serve` stops the server
        self.defaults = RequestDefaults()
        self.metrics = Metrics()
        # llama-server's model name without an alias: the model path as given (common_params_model::get_name)
        self.model_name = settings.alias or str(settings.model_path())

    def load(self) -> None:
        try:
            engine = LlamaEngine.load(self.settings.model_path(), self.settings.model_params())
            caps = engine.chat_template_set().default.caps
            self.defaults = RequestDefaults(
                model_name=self.model_name, n_predict=self.settings.n_predict,
                reasoning_format=self.settings.reasoning_format, enable_thinking=self.settings.enable_thinking,
                parallel_tool_calls=caps.supports_parallel_tool_calls,
            )
            if self.settings.parallel > 1:
                # the scheduler's thread makes the chunks of every slot and hands them to the event loop
                self.scheduler = BatchScheduler(engine, cache_ram_mib=self.settings.cache_ram)
                self.worker = SlotRunner(self.scheduler)
            else:
                self.worker = EngineWorker(engine, abort=engine.cancel)
            self.engine = engine
        except Exception as exc:   # reported by /health; `llamact serve` then stops (exit_on_load_error)
            log.error("loading the model failed: %s", exc)
            self.load_error = str(exc)
            if self.on_load_error is not None:
                self.on_load_error()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        if self.scheduler is not None:
            self.scheduler.close()
        if self.engine is not None:
            self.engine.close()


async def _json_body(request: Request) -> Json:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from None


async def _drain(job: Job, request: Request, on_item: Callable[[Any], None] | None = None) -> Any:
    """Run a job to its end (a non-streamed answer), passing its items to ``on_item``. A client that
    goes away meanwhile cancels it (noticed within DISCONNECT_POLL_S), as a streaming client does."""

    async def consume() -> Any:
        async for item in job:
            if on_item is not None:
                on_item(item)
        return job.result

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)

    answer, gone = asyncio.ensure_future(consume()), asyncio.ensure_future(watch())
    try:
        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not answer.done():   # the client went away, or this handler was cancelled
            job.cancel()
            answer.cancel()
    return answer.result()


async def _first(job: Job, items: AsyncIterator[Any]) -> tuple[bool, Any]:
    """The job's first item (False, None when it ended without any); its errors are raised here, before
    any event is sent, so that they become HTTP errors."""
    try:
        return True, await items.__anext__()
    except StopAsyncIteration:
        return False, None
    except BaseException:
        job.cancel()
        raise


class _Guard:
    """ASGI middleware (not BaseHTTPMiddleware, which would buffer streams and hide disconnects): the API
    key on every path but /health (llama-server's public endpoints), and 503 until the model is loaded."""

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            key = self.state.settings.api_key
            refusal: Response | None = None
            if key:
                headers = Headers(scope=scope)
                given = headers.get("authorization") or headers.get("x-api-key") or ""
                if given.startswith("Bearer "):
                    given = given[len("Bearer "):]
                if given != key:
                    refusal = error_response("Invalid API Key", "authentication_error", 401)
            if refusal is None and self.state.engine is None:
                refusal = error_response(self.state.load_error or "Loading model", "unavailable_error", 503)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(settings: ServerSettings, *, load_in_background: bool = True) -> FastAPI:
    """The application; the model loads when it starts (``app.state.llamact``: its ``ServerState``)."""
    state = ServerState(settings)
    app = FastAPI(title="llamact", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.llamact = state

    @app.on_event("startup")
    async def _start() -> None:
        if load_in_background:
            threading.Thread(target=state.load, name="llamact-load", daemon=True).start()
        else:
            state.load()

    @app.on_event("shutdown")
    async def _stop() -> None:
        state.close()

    app.add_middleware(_Guard, state=state)

    def engine() -> LlamaEngine:
        assert state.engine is not None  # the middleware answers 503 until it is loaded
        return state.engine

    def worker() -> EngineWorker | SlotRunner:
        assert state.worker is not None
        return state.worker

    def without_stop_entries(entries: list[Any], stop_string: str | None) -> list[Any]:
        """A reply not streamed that a stop string ended: llama-server leaves out as many logprobs
        entries as the stop string has tokens, whatever tokens the model actually used."""
        if not entries or stop_string is None:
            return entries
        n_stop = len(engine().tokenize(stop_string, add_special=False, parse_special=False))
        return entries[:max(0, len(entries) - n_stop)]

    @app.get("/health")
    @app.get("/v1/health")
    async def health() -> Response:
        if state.engine is None:
            return error_response(state.load_error or "Loading model", "unavailable_error", 503)
        return JSONResponse({"status": "ok"})

    @app.get("/v1/models")
    @app.get("/models")
    async def models() -> Response:
        e = engine()
        info = {"id": state.model_name, "aliases": [], "tags": [], "object": "model", "created": int(time.time()),
                "owned_by": "llamacpp",
                "meta": {"n_vocab": e.model.vocab.n_tokens, "n_ctx": e.context.n_ctx}}
        return JSONResponse({"models": [{"name": state.model_name, "model": state.model_name}],
                             "object": "list", "data": [info]})

    # -- chat ------------------------------------------------------------------------------------

    @app.post("/v1/chat/completions")
    @app.post("/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            req = chat_request(await _json_body(request), state.defaults)
        except RequestError as exc:
            return error_response(str(exc))
        kwargs = req.create_kwargs
        streams: list[Any] = []

        def start(e: LlamaEngine) -> Any:
            stream = e.create(**kwargs)
            streams.append(stream)
            return stream

        job = worker().submit(start, None if req.stream else (lambda s: s.completion()))
        if not req.stream:
            try:
                completion = await _drain(job, request)
            except BaseException as exc:
                return exception_response(exc)
            stream = streams[0]
            t = completion.timings
            state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms, t.cache_n)
            if completion.logprobs:
                completion = replace(completion, logprobs=without_stop_entries(completion.logprobs,
                                                                               stream.stop_string))
            return JSONResponse(completion.to_openai(stream.id, state.model_name, stream.created))

        items = aiter(job)
        try:
            has_first, first = await _first(job, items)
        except BaseException as exc:
            return exception_response(exc)
        fingerprint = system_fingerprint()

        async def events() -> AsyncIterator[bytes]:
            finished = False
            try:
                if has_first:
                    stream = streams[0]
                    pending = [first]
                    while True:
                        for chunk in pending:
                            for data in chunk.to_openai(stream.id, state.model_name, stream.created,
                                                        fingerprint=fingerprint, include_usage=req.include_usage):
                                yield sse(data)
                            if chunk.timings is not None:
                                t = chunk.timings
                                state.metrics.record(t.prompt_n, t.prompt_ms, t.predicted_n, t.predicted_ms,
                                                     t.cache_n)
                        try:
                            pending = [await items.__anext__()]
                        except StopAsyncIteration:
                            break
                finished = True
                yield b"data: [DONE]\n\n"
            except LlamaException as exc:
                finished = True
                yield sse(error_body(str(exc), "server_error", 500))
            finally:
                if not finished:   # the client went away: free the slot
                    job.cancel()

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    # -- raw completions ---------------------------------------------------------------------------

    @app.post("/v1/completions")
    @app.post("/completions")
    async def completions(request: Request) -> Response:
        try:
            req = completion_request(await _json_body(request), state.defaults)
        except RequestError as exc:
            return error_response(str(exc))
        cid = "cmpl-" + completion_id()[len("chatcmpl-"):]
        created = int(time.time())
        fingerprint = system_fingerprint()
        job = worker().submit(lambda e: e.generate(req.prompt, req.params))
        base = {"created": created, "model": state.model_name, "system_fingerprint": fingerprint,
                "object": "text_completion", "id": cid}

        def choice(text: str, finish: str | None, entries: list[Any] | None = None) -> Json:
            logprobs = {"content": entries} if entries else None
            return {"choices": [{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}], **base}

        def usage(last: Any) -> Json:
            t = last.timings
            n_decoded = t.n_generated + int(last.end_token is not None)
            n_prompt = t.n_prompt + t.n_cached
            state.metrics.record(t.n_prompt, t.prompt_ms, n_decoded, t.decode_ms, t.n_cached)
            return {"completion_tokens": n_decoded, "prompt_tokens": n_prompt, "total_tokens": n_decoded + n_prompt,
                    "prompt_tokens_details": {"cached_tokens": t.n_cached}}

        if not req.stream:
            chunks: list[Any] = []
            try:
                await _drain(job, request, chunks.append)
            except BaseException as exc:
                return exception_response(exc)
            last = chunks[-1]
            entries = without_stop_entries(
                [_released_entry(c) for c in chunks if c.logprob is not None and not c.incomplete], last.stop_string)
            body = choice("".join(c.text for c in chunks), last.finish_reason, entries)
            body["usage"] = usage(last)
            return JSONResponse(body)

        items = aiter(job)
        try:
            has_first, first = await _first(job, items)
        except BaseException as exc:
            return exception_response(exc)

        async def events() -> AsyncIterator[bytes]:
            # llama-server's events: one per token (its text may be "" while a stop string may be
            # starting; none for a token that ends inside a UTF-8 character), one for the end token,
            # then the finish reason with the usage
            finished = False
            try:
                chunk = first
                while has_first:
                    entry = [_released_entry(chunk)] if chunk.logprob is not None else None
                    if chunk.stop_reason is not None:
                        if chunk.end_token is not None or chunk.text:
                            yield sse(choice(chunk.text, None, entry))   # the final chunk's entry is the end token's
                        final = choice("", chunk.finish_reason)
                        final["usage"] = usage(chunk)
                        yield sse(final)
                        break
                    if not chunk.incomplete:
                        yield sse(choice(chunk.text, None, entry))
                    try:
                        chunk = await items.__anext__()
                    except StopAsyncIteration:
                        break
                finished = True
                yield b"data: [DONE]\n\n"
            except LlamaException as exc:
                finished = True
                yield sse(error_body(str(exc), "server_error", 500))
            finally:
                if not finished:
                    job.cancel()

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    # -- templates and tokens ----------------------------------------------------------------------

    @app.post("/apply-template")
    async def apply_template(request: Request) -> Response:
        try:
            req = chat_request(await _json_body(request), state.defaults)
            kwargs = {k: v for k, v in req.create_kwargs.items() if k not in _GENERATION_ONLY}
            result = engine().chat_template(**kwargs)
        except LlamaException as exc:
            return exception_response(exc)
        return JSONResponse({"prompt": result.prompt})

    @app.post("/template-details")
    async def template_details(request: Request) -> Response:
        """llamact's own: what ``/apply-template`` renders, with the detected family, format, grammar and
        stops (the page's prompt panel)."""
        try:
            req = chat_request(await _json_body(request), state.defaults)
            kwargs = {k: v for k, v in req.create_kwargs.items() if k not in _GENERATION_ONLY}
            result = engine().chat_template(**kwargs)
        except LlamaException as exc:
            return exception_response(exc)
        return JSONResponse({
            "prompt": result.prompt, "family": result.family, "format": result.format,
            "generation_prompt": result.generation_prompt, "grammar": result.grammar,
            "grammar_lazy": result.grammar_lazy, "grammar_triggers": [t.value for t in result.grammar_triggers],
            "preserved_tokens": list(result.preserved_tokens), "additional_stops": list(result.additional_stops),
            "thinking_start_tag": result.thinking_start_tag, "thinking_end_tags": list(result.thinking_end_tags),
        })

    @app.get("/")
    async def page() -> Response:
        html = resources.files("llamact.server").joinpath("static/index.html").read_text(encoding="utf-8")
        return HTMLResponse(html)

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        try:
            body = await _json_body(request)
        except RequestError as exc:
            return error_response(str(exc))
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, str):
            return error_response("'content' must be a string")
        add_special = bool(body.get("add_special", False))
        parse_special = bool(body.get("parse_special", True))
        tokens = engine().tokenize(content, add_special=add_special, parse_special=parse_special)
        if not body.get("with_pieces", False):
            return JSONResponse({"tokens": tokens})
        vocab = engine().model.vocab
        out = []
        for token in tokens:
            piece = vocab.token_to_piece(token, special=True)
            try:
                out.append({"id": token, "piece": piece.decode("utf-8")})
            except UnicodeDecodeError:
                out.append({"id": token, "piece": list(piece)})
        return JSONResponse({"tokens": out})

    @app.post("/detokenize")
    async def detokenize(request: Request) -> Response:
        try:
            body = await _json_body(request)
        except RequestError as exc:
            return error_response(str(exc))
        tokens = body.get("tokens", []) if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            return error_response("'tokens' must be a list of token ids")
        try:
            return JSONResponse({"content": engine().detokenize(tokens)})
        except LlamaException as exc:
            return exception_response(exc)

    @app.get("/props")
    async def props() -> Response:
        return JSONResponse(props_body(engine(), model_alias=state.model_name, model_path=str(settings.model_path()),
                                       n_slots=settings.parallel, n_predict=settings.n_predict))

    @app.get("/metrics")
    async def metrics() -> Response:
        w, sched = worker(), state.scheduler
        running, waiting = (sched.n_active, sched.n_waiting) if sched is not None else (w.n_running, w.n_waiting)
        decodes = (sched.n_decodes, sched.n_busy_slots, sched.n_tokens_max) if sched is not None else (0, 0, 0)
        return PlainTextResponse(state.metrics.prometheus(running, waiting + (w.n_waiting if sched else 0),
                                                          w.n_cancelled, *decodes),
                                 media_type="text/plain; version=0.0.4")

    return app
