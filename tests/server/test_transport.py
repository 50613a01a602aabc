"""``llamact serve`` against hostile transport (issue 26): bodies too large, too deep, not JSON, not
text; connections that never finish a request; clients that leave; the event loop kept free."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HOST, LiveServer

pytestmark = [pytest.mark.model]

LIMIT = 1 << 20   # the test server's --max-body-size
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def live(smollm2_path: Path) -> Iterator[LiveServer]:
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "2048",
                    "--max-body-size", str(LIMIT), "--timeout", "2",
                    "--max-tokenize-tokens", "1000") as server:
        yield server


def post(live: LiveServer, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, raw = live.request("POST", path, body, headers=JSON if headers is None else headers)
    return status, json.loads(raw)


def refused(answer: tuple[int, Any], status: int, words: str) -> None:
    code, body = answer
    assert code == status, body
    assert body["error"]["code"] == status and words in body["error"]["message"], body


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize",
                                  "/apply-template"])
def test_deep_json_is_a_request_error(live: LiveServer, path: str) -> None:
    refused(post(live, path, b"[" * 100_000 + b"]" * 100_000), 400, "nested more than 512 levels")
    # deep enough to pass json.loads, deep enough to break code that walks it
    deep = b'{"messages": [{"role": "user", "content": "hi", "x": ' + b"[" * 900 + b"]" * 900 + b"}]}"
    refused(post(live, path, deep), 400, "nested more than 512 levels")


def test_text_llama_cpp_cannot_take_is_a_request_error(live: LiveServer) -> None:
    refused(post(live, "/tokenize", b'{"content": "a\\ud800b"}'), 400, "lone surrogate")
    refused(post(live, "/detokenize", b'{"tokens": [1, 1000000000]}'), 400, "'tokens'")
    refused(post(live, "/detokenize", b'{"tokens": [-1]}'), 400, "'tokens'")
    refused(post(live, "/tokenize", b'{"content": 5}'), 400, "'content' must be a string")
    for stream in (False, True):
        body = json.dumps({"prompt": [1, 99_999_999], "max_tokens": 1, "stream": stream}).encode()
        refused(post(live, "/v1/completions", body), 400, "outside this model's vocabulary")
        body = json.dumps({"prompt": "a\ud800", "max_tokens": 1, "stream": stream}).encode()
        refused(post(live, "/v1/completions", body), 400, "'prompt' holds a lone surrogate")


def test_token_lists_over_the_limit_are_refused(live: LiveServer) -> None:
    refused(post(live, "/tokenize", json.dumps({"content": "a " * 3000, "with_pieces": True}).encode()), 400,
            "limit of 1000 (--max-tokenize-tokens)")
    refused(post(live, "/detokenize", json.dumps({"tokens": [1] * 1001}).encode()), 400, "'tokens' holds 1001 tokens")
    assert post(live, "/detokenize", json.dumps({"tokens": [1] * 1000}).encode())[0] == 200


def test_counted_and_generated_texts_are_bounded_too(live: LiveServer) -> None:
    """The token counts refuse a text past --max-tokenize-tokens and a raw prompt past the context is
    the prompt-too-long error, both decided while tokenizing (a huge text is counted on a prefix)."""
    words = "a " * 3000
    refused(post(live, "/v1/messages/count_tokens", json.dumps(
        {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": words}]}).encode()), 400,
        "limit of 1000 (--max-tokenize-tokens)")
    refused(post(live, "/v1/responses/input_tokens", json.dumps({"input": words}).encode()), 400,
            "limit of 1000 (--max-tokenize-tokens)")
    status, body = post(live, "/v1/completions", json.dumps({"prompt": "a " * 200_000, "max_tokens": 1}).encode())
    assert status == 400 and body["error"]["type"] == "exceed_context_size_error", body
    assert "the prompt (at least" in body["error"]["message"], body
    assert post(live, "/v1/messages/count_tokens", json.dumps(
        {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}).encode())[0] == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(live: LiveServer) -> None:
    conn = http.client.HTTPConnection(HOST, live.port, timeout=30)
    try:   # announced as 50 MB, of which the server sees a few bytes: it answers without waiting for more
        conn.putrequest("POST", "/tokenize")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(50 << 20))
        conn.endheaders(b'{"content": "')
        response = conn.getresponse()
        refused((response.status, json.loads(response.read())), 413, f"limit of {LIMIT} bytes")
    finally:
        conn.close()


def test_a_chunked_body_over_the_limit_is_refused(live: LiveServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(4):
            yield b"a" * (LIMIT // 2)
        yield b'"}'

    conn = http.client.HTTPConnection(HOST, live.port, timeout=30)
    try:
        conn.request("POST", "/tokenize", body=chunks(), headers=JSON, encode_chunked=True)
        response = conn.getresponse()
        refused((response.status, json.loads(response.read())), 413, "--max-body-size")
    except (BrokenPipeError, ConnectionResetError):   # the server may close before the client stops sending
        pass
    finally:
        conn.close()
    assert live.request("GET", "/health")[0] == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          None])
def test_a_body_not_sent_as_json_is_refused(live: LiveServer, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = b'{"prompt": "Hi", "max_tokens": 1}'
    refused(post(live, "/v1/completions", body, headers), 415, "Content-Type: application/json")


def test_json_with_a_charset_is_json(live: LiveServer) -> None:
    status, body = post(live, "/tokenize", b'{"content": "Hi"}', {"Content-Type": "application/json; charset=utf-8"})
    assert status == 200 and body["tokens"], body


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("sent", [b"", b"POST /tokenize HTTP/1.1\r\nHost: x\r\n",
                                  b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  b"Content-Length: 100\r\n\r\n{\"content\":"])
def test_a_request_never_finished_is_closed_after_the_timeout(live: LiveServer, sent: bytes) -> None:
    with socket.create_connection((HOST, live.port)) as sock:
        sock.sendall(sent)
        assert _closed_within(sock, 30), "the server kept a half-sent request open"
    assert live.request("GET", "/health")[0] == 200


def test_a_slow_request_is_closed_even_while_bytes_trickle_in(live: LiveServer) -> None:
    with socket.create_connection((HOST, live.port)) as sock:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        try:
            while time.monotonic() - started < 30:
                sock.sendall(b"X-A: b\r\n")
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            return
        pytest.fail("a slowloris client kept its connection for 30 s")


def test_the_event_loop_answers_others_during_a_long_tokenize(server: LiveServer) -> None:
    """20 MB of text takes seconds to tokenize; /health answers meanwhile, before the tokenize's answer
    begins (on the event loop it waited for it)."""
    body = json.dumps({"content": "hello world " * (20_000_000 // 12)}).encode()
    answered: list[float] = []

    def tokenize() -> None:
        conn = http.client.HTTPConnection(HOST, server.port, timeout=300)
        try:
            conn.request("POST", "/tokenize", body=body, headers=server.headers())
            response = conn.getresponse()   # its status line: the handler has returned
            answered.append(time.monotonic())   # 400: over the token limit, found once tokenized
            response.read()
        finally:
            conn.close()

    worker = threading.Thread(target=tokenize)
    worker.start()
    time.sleep(1.0)
    status, _ = server.request("GET", "/health")
    health = time.monotonic()
    worker.join()
    assert status == 200
    assert health < answered[0], "/health waited for the tokenize to end"


def test_the_event_loop_answers_others_while_a_large_chat_body_is_read(server: LiveServer) -> None:
    """700,000 messages (25 MB) take read_chat seconds, the last one refused by the messages parser
    (a text part without its text: the checks before the parser let it by): between the body sent and
    the 400, /health keeps answering (measured: 19 times; 3 with read_chat on the event loop)."""
    messages = [{"role": "user", "content": "hi"}] * 700_000 + [{"role": "user", "content": [{"type": "text"}]}]
    body = json.dumps({"messages": messages}).encode()
    times: dict[str, float] = {}

    def chat() -> None:
        conn = http.client.HTTPConnection(HOST, server.port, timeout=300)
        try:
            conn.request("POST", "/v1/chat/completions", body=body, headers=server.headers())
            times["sent"] = time.monotonic()
            response = conn.getresponse()
            times["answered"] = time.monotonic()
            assert response.status == 400
            response.read()
        finally:
            conn.close()

    worker = threading.Thread(target=chat)
    worker.start()
    health: list[float] = []
    while worker.is_alive():
        assert server.request("GET", "/health")[0] == 200
        health.append(time.monotonic())
        time.sleep(0.05)
    worker.join()
    between = [t for t in health if times["sent"] < t < times["answered"]]
    assert len(between) >= 10, (len(between), times["answered"] - times["sent"])


def _processing(live: LiveServer) -> float:
    status, raw = live.request("GET", "/metrics")
    assert status == 200
    line = next(x for x in raw.decode().splitlines() if x.startswith("llamacpp:requests_processing "))
    return float(line.split()[1])


def test_a_finished_request_is_no_longer_processing(live: LiveServer) -> None:
    """/metrics read right after a reply ends counts it no more (the worker let go of it first)."""
    seen = []
    for i in range(20):
        body = {"prompt": f"Count {i}", "max_tokens": 2, "stream": i % 2 == 0}
        status, _ = live.request("POST", "/v1/completions", json.dumps(body).encode(), headers=JSON)
        assert status == 200
        seen.append(_processing(live))
    assert seen == [0.0] * 20


def test_a_client_that_leaves_a_reply_not_streamed_logs_no_traceback(live: LiveServer) -> None:
    raw = json.dumps({"prompt": "Once", "max_tokens": 100_000, "ignore_eos": True}).encode()
    with socket.create_connection((HOST, live.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
        time.sleep(1.0)
    for _ in range(100):   # its slot is freed
        if _processing(live) == 0:
            break
        time.sleep(0.1)
    assert _processing(live) == 0
    log = live.log_tail(20_000)
    assert "Traceback" not in log and "InvalidStateError" not in log, log


class _Transport:
    """What the protocol needs of an asyncio transport; records an abort."""

    def __init__(self) -> None:
        self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def write(self, data: bytes) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def test_a_client_that_stops_reading_is_dropped_after_the_timeout() -> None:
    """A socket whose write buffer stays full for --timeout s is aborted (a live client needs a minute
    of kernel buffers to get there); one that drains in time is kept."""
    import asyncio

    import uvicorn
    from uvicorn.server import ServerState

    from llamact.server.http.transport import request_timeout_protocol

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    async def run(resume: bool) -> bool:
        config = uvicorn.Config(app, lifespan="off")
        config.load()
        protocol = request_timeout_protocol(0.2)(config, ServerState(), {})
        transport = _Transport()
        protocol.connection_made(transport)   # type: ignore[arg-type]
        protocol._stop_clock()   # as once a whole request has arrived
        protocol.pause_writing()
        if resume:
            await asyncio.sleep(0.1)
            protocol.resume_writing()
        await asyncio.sleep(0.5)
        return transport.aborted

    assert asyncio.run(run(resume=False)) is True
    assert asyncio.run(run(resume=True)) is False


def test_no_hostile_request_left_a_traceback(live: LiveServer) -> None:
    """Last in this module: everything above was refused or dropped without an unhandled error."""
    assert live.request("GET", "/health")[0] == 200
    log = live.log_tail(200_000)
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]
