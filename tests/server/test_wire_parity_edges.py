"""Wire parity at the edges of the routes: paths and methods no route serves, content parts the server
refuses before reading the messages, and the thinking default of a template. The same requests go to
llama-server at the pin (with an API key, as the main test server has one) and to ``llamact serve``;
status and body must be equal."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from server_live import API_KEY, LiveServer

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

KEY = {"Authorization": f"Bearer {API_KEY}"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(ServerConfig(smollm2_path, extra_args=("--api-key", API_KEY)), find_llama_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _answer(port: int, method: str, path: str, headers: dict[str, str], body: Json = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


NOT_ROUTED = [("GET", "/nope"), ("POST", "/nope"), ("POST", "/v1/nope/deeper"), ("GET", "/v1/chat/completions"),
              ("PUT", "/v1/chat/completions"), ("DELETE", "/v1/models"), ("PATCH", "/props"), ("GET", "/tokenize"),
              ("DELETE", "/health")]


@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no_key"])
@pytest.mark.parametrize(("method", "path"), NOT_ROUTED, ids=[f"{m} {p}" for m, p in NOT_ROUTED])
def test_a_path_or_method_no_route_serves_answers_as_llama_server(method: str, path: str, with_key: bool,
                                                                  upstream: LlamaServer, server: LiveServer) -> None:
    headers = {**JSON, **KEY} if with_key else JSON
    expected = _answer(upstream.port, method, path, headers)
    got = _answer(server.port, method, path, headers)
    assert expected[0] in (401, 404)   # the key is checked first, except on the public /health
    assert got == expected


DISABLED = [("GET", "/tools"), ("POST", "/tools"), ("GET", "/cors-proxy"), ("POST", "/cors-proxy"),
            ("POST", "/v1/audio/transcriptions"), ("POST", "/audio/transcriptions")]


@pytest.mark.parametrize(("method", "path"), DISABLED, ids=[f"{m} {p}" for m, p in DISABLED])
def test_a_feature_this_server_lacks_is_refused_as_llama_server_refuses_it(method: str, path: str,
                                                                           upstream: LlamaServer,
                                                                           server: LiveServer) -> None:
    """The web UI's tools and MCP proxy are off (403), transcription needs an audio projector (501)."""
    expected = _answer(upstream.port, method, path, {**JSON, **KEY}, {})
    got = _answer(server.port, method, path, {**JSON, **KEY}, {})
    assert expected[0] in (403, 501)
    assert got == expected


HELLO = {"type": "text", "text": "Hello"}
CONTENT_PARTS = {
    "media_marker": [HELLO, {"type": "media_marker", "text": "<__media__>"}],
    "unknown_type": [{"type": "file", "file": {"file_id": "x"}}],
    "no_type": [{"text": "Hello"}],
    "image_without_projector": [HELLO, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
    "audio_without_projector": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}],
}


@pytest.mark.parametrize("name", sorted(CONTENT_PARTS))
def test_content_parts_the_server_refuses_are_refused_with_llama_servers_message(
        name: str, upstream: LlamaServer, server: LiveServer) -> None:
    """llama-server's pass over content parts before it reads the messages: only text and media parts
    (a ``media_marker`` part is the server's own making). Its media refusal is a 500 (a
    ``std::runtime_error``); llamact answers the request's error 400 with the same text (deviation 12)."""
    body = {"messages": [{"role": "user", "content": CONTENT_PARTS[name]}], "max_tokens": 4}
    status, expected = _answer(upstream.port, "POST", "/v1/chat/completions", {**JSON, **KEY}, body)
    got_status, got = _answer(server.port, "POST", "/v1/chat/completions", {**JSON, **KEY}, body)
    assert status in (400, 500) and got_status == 400
    assert got["error"]["message"] == expected["error"]["message"]
    assert got["error"]["type"] == ("invalid_request_error" if status == 500 else expected["error"]["type"])
    assert (status == 500) is name.endswith("_without_projector")


APERTUS = "Apertus-8B-Instruct"
THINKING_TEMPLATES = [APERTUS, "Qwen-QwQ-32B"]


@pytest.mark.parametrize("template", THINKING_TEMPLATES)
def test_the_servers_thinking_default_is_llama_servers(template: str, smollm2_path: Path,
                                                       template_file: Callable[[str], Path]) -> None:
    """llama-server turns thinking on by default only where the template supports switching it
    (``common_chat_templates_support_enable_thinking``); Apertus reads ``enable_thinking`` itself and
    printed "Deliberation: enabled" on llamact while llama-server printed "disabled"."""
    path = template_file(template)
    body = {"messages": [{"role": "user", "content": "Hello"}]}
    with LlamaServer(ServerConfig(smollm2_path, path), find_llama_server()) as ref, \
            LiveServer("--model", str(smollm2_path), "--threads", "1", "--chat-template-file", str(path)) as ours:
        expected = _answer(ref.port, "POST", "/apply-template", JSON, body)
        got = _answer(ours.port, "POST", "/apply-template", JSON, body)
    assert expected[0] == 200 and got == expected
    if template == APERTUS:
        assert "Deliberation: disabled" in expected[1]["prompt"]
