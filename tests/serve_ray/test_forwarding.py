"""A request carried to a replica and run through an ASGI app in process (llamact/serve_ray/asgi.py,
prompts.py): status, headers and bytes as the app sends them, a stream in batches, the client's
leaving seen by the app; the prompt a request runs, as the router keys it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from llamact import LlamaEngine, ModelParams, Tokenizer
from llamact.serve_ray.asgi import ForwardedResponse, RequestParts, call_app
from llamact.serve_ray.prompts import prompt_tokens

LEFT: list[str] = []


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"body": (await request.body()).decode(), "q": request.query_params.get("q"),
                         "h": request.headers.get("x-test")}, status_code=201, headers={"x-answer": "1"})


async def ticks(request: Request) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        try:
            for i in range(1000):
                yield f"data: {i}\n\n".encode()
                await asyncio.sleep(0.001)
        finally:
            LEFT.append("closed")
    return StreamingResponse(events(), media_type="text/event-stream")


APP = Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/ticks", ticks)])


def parts(method: str, path: str, body: bytes = b"", query: bytes = b"") -> RequestParts:
    return RequestParts(method, path, query, ((b"x-test", b"yes"), (b"content-type", b"application/json")), body)


async def collect(request: RequestParts) -> list[dict[str, Any]]:
    return [m async for batch in call_app(APP, request) for m in batch]


def test_an_answer_comes_back_as_the_app_sent_it() -> None:
    messages = asyncio.run(collect(parts("POST", "/echo", b'{"a": 1}', b"q=2")))
    start, body = messages[0], b"".join(m.get("body", b"") for m in messages[1:])
    assert start["type"] == "http.response.start" and start["status"] == 201
    assert (b"x-answer", b"1") in start["headers"]
    assert json.loads(body) == {"body": '{"a": 1}', "q": "2", "h": "yes"}


def test_a_stream_comes_in_batches_and_a_reader_that_leaves_stops_it() -> None:
    async def read_some() -> int:
        n = 0
        batches = call_app(APP, parts("GET", "/ticks"))
        async for batch in batches:
            n += sum(1 for m in batch if m.get("body"))
            if n >= 20:
                break
        await batches.aclose()   # what Ray does with a generator whose caller went away
        return n

    LEFT.clear()
    assert asyncio.run(read_some()) >= 20
    assert LEFT == ["closed"]


def test_the_ingress_answers_with_the_forwarded_messages() -> None:
    async def batches() -> AsyncIterator[list[dict[str, Any]]]:
        yield [{"type": "http.response.start", "status": 418, "headers": [(b"x-a", b"b")]}]
        yield [{"type": "http.response.body", "body": b"tea", "more_body": False}]

    async def empty() -> AsyncIterator[list[dict[str, Any]]]:
        if False:
            yield []

    async def send_all(source: Any) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
        await ForwardedResponse(source)({"type": "http"}, None, send)
        return sent

    sent = asyncio.run(send_all(batches()))
    assert [m.get("status") for m in sent] == [418, None] and sent[1]["body"] == b"tea"
    assert asyncio.run(send_all(empty()))[0]["status"] == 502


@pytest.mark.model
def test_the_prompt_is_what_the_server_will_run(smollm2_path: Path) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    with Tokenizer.load(smollm2_path) as tokenizer, LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256)) as engine:
        chat = prompt_tokens(tokenizer, "/v1/chat/completions", json.dumps({"messages": messages}).encode())
        assert chat == engine.tokenize(engine.chat_template(messages).prompt)
        assert prompt_tokens(tokenizer, "/completion", b'{"prompt": "Hello"}') == engine.tokenize("Hello")
        assert prompt_tokens(tokenizer, "/v1/completions", b'{"prompt": [1, 2, 3]}') == [1, 2, 3]
        for path, body in (("/v1/chat/completions", b"{not json"), ("/v1/chat/completions", b'{"messages": 5}'),
                           ("/v1/chat/completions", b"[]"), ("/v1/embeddings", b'{"input": "x"}'),
                           ("/completion", b'{"prompt": [true]}'), ("/completion", b'{"prompt": ""}')):
            assert prompt_tokens(tokenizer, path, body) is None, (path, body)
