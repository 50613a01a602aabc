"""docs/design.md deviation 17 on every chat route: a reply whose call the model wrote outside the
envelope, or that the parser cannot read at all, is a 200 with the calls that validate and llamact's
extension field ``llamact`` (``{"parse_error", "recovered"}``) -- chat, Responses and Messages,
streamed and not -- and the parse error in the log; ``upstream_compat`` (the request's field, or
``--upstream-compat``) gives llama-server's answer: the call as text, or a 500 / an error event.

The replies are given word for word (``scripted_model``: the server's real prompt, sampling
replaced), since what a tiny model writes cannot be chosen; Qwen 2.5's template (the one
Qwen2.5-Coder ships, Hermes envelopes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_model import SCRIPT
from server_live import HOST, LiveServer, sse_events

pytestmark = [pytest.mark.model]

Json = Any
WEATHER: Json = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FENCED = 'Let me check.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
STRAY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\nDone.'
PARSE_ERROR = "The model produced output that does not match the expected peg-native format"
FENCED_FIELD = {"parse_error": None, "recovered": ["fenced_block"]}
STRAY_FIELD = {"parse_error": PARSE_ERROR, "recovered": ["stray_text"]}


def _serve(smollm2_path: Path, template: Path, *args: str) -> LiveServer:
    return LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "2048",
                      "--chat-template-file", str(template), *args, scripted=True)


@pytest.fixture(scope="module")
def scripted_server(smollm2_path: Path, template_file: Callable[[str], Path]) -> Iterator[LiveServer]:
    with _serve(smollm2_path, template_file("Qwen-Qwen2.5-7B-Instruct")) as live:
        yield live


def post(live: LiveServer, path: str, body: Json) -> tuple[int, Json]:
    status, raw = live.request("POST", path, json.dumps(body).encode())
    return status, json.loads(raw)


def chat(output: str, **extra: Any) -> Json:
    return {"messages": [{"role": "user", "content": SCRIPT + output}], "tools": [WEATHER], **extra}


def _call(call: Json) -> tuple[str, Json]:
    return call["function"]["name"], json.loads(call["function"]["arguments"])


PARIS = ("get_weather", {"city": "Paris"})


# -- chat completions ------------------------------------------------------------------------------


@pytest.mark.parametrize(("output", "field", "content"), [(FENCED, FENCED_FIELD, "Let me check.\n"),
                                                           (STRAY, STRAY_FIELD, "Done.")], ids=["fenced", "stray"])
def test_chat_answers_200_with_the_extension_field(scripted_server: LiveServer, output: str, field: Json,
                                                   content: str) -> None:
    status, body = post(scripted_server, "/v1/chat/completions", chat(output))
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["llamact"] == field
    assert choice["message"]["content"] == content and [_call(c) for c in choice["message"]["tool_calls"]] == [PARIS]

    events = list(sse_events(HOST, scripted_server.port, "/v1/chat/completions", chat(output, stream=True),
                             scripted_server.headers()))
    assert events[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == content
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert len(calls) == 1 and _call(calls[0]) == PARIS and calls[0]["id"]
    last = events[-2]["choices"][0]
    assert last["finish_reason"] == "tool_calls" and last["delta"]["llamact"] == field
    assert all("llamact" not in d for d in deltas[:-1])


def test_upstream_compat_gives_llama_servers_answer(scripted_server: LiveServer) -> None:
    status, body = post(scripted_server, "/v1/chat/completions", chat(FENCED, upstream_compat=True))
    assert status == 200 and body["choices"][0]["message"]["content"] == FENCED
    assert body["choices"][0]["finish_reason"] == "stop" and "llamact" not in body["choices"][0]["message"]
    status, body = post(scripted_server, "/v1/chat/completions", chat(STRAY, upstream_compat=True))
    assert (status, body["error"]["type"], body["error"]["message"]) == (500, "server_error", PARSE_ERROR)
    events = list(sse_events(HOST, scripted_server.port, "/v1/chat/completions",
                             chat(STRAY, upstream_compat=True, stream=True), scripted_server.headers()))
    assert any(isinstance(e, dict) and e.get("error", {}).get("message") == PARSE_ERROR for e in events), events
    status, body = post(scripted_server, "/v1/chat/completions", chat(STRAY, upstream_compat="yes"))
    assert status == 400 and "upstream_compat" in body["error"]["message"]


def test_the_log_names_the_parse_error(scripted_server: LiveServer) -> None:
    post(scripted_server, "/v1/chat/completions", chat(STRAY))
    log = scripted_server.log_tail(20000)
    assert f"the parser could not read a reply ({PARSE_ERROR})" in log and "recovered by: stray_text" in log


def test_a_server_started_upstream_compat_answers_as_llama_server(smollm2_path: Path,
                                                                 template_file: Callable[[str], Path]) -> None:
    with _serve(smollm2_path, template_file("Qwen-Qwen2.5-7B-Instruct"), "--upstream-compat") as live:
        status, body = post(live, "/v1/chat/completions", chat(STRAY))
        assert (status, body["error"]["message"]) == (500, PARSE_ERROR)
        status, body = post(live, "/v1/chat/completions", chat(STRAY, upstream_compat=False))
        assert status == 200 and body["choices"][0]["message"]["llamact"] == STRAY_FIELD


# -- Responses -------------------------------------------------------------------------------------

RESPONSES_TOOL: Json = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}


def responses(output: str, **extra: Any) -> Json:
    return {"input": SCRIPT + output, "tools": [RESPONSES_TOOL], **extra}


def named_events(live: LiveServer, path: str, body: Json) -> list[tuple[str, Json]]:
    import http.client

    conn = http.client.HTTPConnection(HOST, live.port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=live.headers())
        response = conn.getresponse()
        assert response.status == 200
        out, name = [], ""
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[len("data: "):])))
        return out
    finally:
        conn.close()


@pytest.mark.parametrize(("output", "field", "content"), [(FENCED, FENCED_FIELD, "Let me check.\n"),
                                                           (STRAY, STRAY_FIELD, "Done.")], ids=["fenced", "stray"])
def test_responses_answer_200_with_the_extension_field(scripted_server: LiveServer, output: str, field: Json,
                                                       content: str) -> None:
    status, body = post(scripted_server, "/v1/responses", responses(output))
    assert status == 200, body
    assert body["llamact"] == field
    [call] = [item for item in body["output"] if item["type"] == "function_call"]
    assert (call["name"], json.loads(call["arguments"])) == PARIS
    assert [item["content"][0]["text"] for item in body["output"] if item["type"] == "message"] == [content]

    events = named_events(scripted_server, "/v1/responses", responses(output, stream=True))
    names = [name for name, _ in events]
    assert names[-1] == "response.completed" and events[-1][1]["response"]["llamact"] == field
    # the default stream's last deltas are deltas: the call's item is added and its arguments streamed
    added = [data["item"] for name, data in events if name == "response.output_item.added"]
    assert any(item["type"] == "function_call" and item["name"] == "get_weather" for item in added)
    streamed = "".join(data["delta"] for name, data in events if name == "response.function_call_arguments.delta")
    assert json.loads(streamed) == PARIS[1]
    text = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    assert text == content


# -- Messages --------------------------------------------------------------------------------------

MESSAGES_TOOL: Json = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}


def messages(output: str, **extra: Any) -> Json:
    return {"messages": [{"role": "user", "content": SCRIPT + output}], "tools": [MESSAGES_TOOL], "max_tokens": 64,
            **extra}


@pytest.mark.parametrize(("output", "field", "content"), [(FENCED, FENCED_FIELD, "Let me check.\n"),
                                                           (STRAY, STRAY_FIELD, "Done.")], ids=["fenced", "stray"])
def test_messages_answer_200_with_the_extension_field(scripted_server: LiveServer, output: str, field: Json,
                                                      content: str) -> None:
    status, body = post(scripted_server, "/v1/messages", messages(output))
    assert status == 200, body
    assert body["llamact"] == field and body["stop_reason"] == "tool_use"
    assert [b["text"] for b in body["content"] if b["type"] == "text"] == [content]
    assert [(b["name"], b["input"]) for b in body["content"] if b["type"] == "tool_use"] == [PARIS]

    events = named_events(scripted_server, "/v1/messages", messages(output, stream=True))
    delta = [data for name, data in events if name == "message_delta"]
    assert len(delta) == 1 and delta[0]["llamact"] == field and delta[0]["delta"]["stop_reason"] == "tool_use"
    starts = [data["content_block"] for name, data in events if name == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"] and starts[1]["name"] == "get_weather"
    text = "".join(data["delta"].get("text", "") for name, data in events if name == "content_block_delta")
    assert text == content
    status, body = post(scripted_server, "/v1/messages", messages(STRAY, upstream_compat=True))
    assert status == 500
