"""Wire parity of Anthropic's Messages API: the same ``/v1/messages`` and ``/v1/messages/count_tokens``
requests sent to upstream's llama-server and to ``llamact serve`` give the same bodies and the same
event sequences (``event:`` names and data), once the message and tool-call ids are removed.

llama-server drops every field of an Anthropic body it does not convert, ``cache_prompt`` among them,
so both servers reuse their prompt cache. To make that the same on both, the reference runs without
its host-memory prompt cache (``--cache-ram 0``: one slot's cache, as llamact's single engine) and
before each case both get the same raw completion of an unrelated prompt; the reply not streamed
then evaluates the whole prompt, and the streamed one after it reuses all of it but the last token,
on both sides alike."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HERMES, QWQ, LiveServer

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

WEATHER_TOOL: Json = {"name": "get_weather", "description": "Get the current weather for a city",
                      "input_schema": {"type": "object", "properties": {
                          "location": {"type": "string", "description": "City name"},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}


def _call(n: int, city: str) -> Json:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": f"call{n}2345", "name": "get_weather", "input": {"location": city}}]}


def _result(n: int, content: Json) -> Json:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"call{n}2345", "content": content}]}


# few-shot: earlier turns show calls, so that SmolLM2 reaches one (as the chat route's cases)
WEATHER_CALLS: Json = [
    {"role": "user", "content": "Weather in Berlin?"}, _call(1, "Berlin"), _result(1, "12 C"),
    {"role": "user", "content": "Weather in Rome?"}, _call(2, "Rome"), _result(2, [{"type": "text", "text": "20 C"}]),
    {"role": "user", "content": "Weather in Paris?"},
]
# the turn after a call: its result in blocks, the model answers
TOOL_RESULT_TURN: Json = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                      {"type": "tool_use", "id": "call32345", "name": "get_weather",
                                       "input": {"location": "Paris"}}]},
    _result(3, [{"type": "text", "text": "18 C"}, {"type": "text", "text": " and sunny"}]),
]
HELLO: Json = [{"role": "user", "content": "Say hello."}]
COLORS: Json = [{"role": "user", "content": [{"type": "text", "text": "Name three colors,"},
                                             {"type": "text", "text": " separated by commas."}]}]

# name: (server, body); every body is sent not streamed, then streamed
CASES: dict[str, tuple[str, Json]] = {
    "plain": ("own", {"messages": HELLO, "max_tokens": 16}),
    "system_blocks": ("own", {"system": [{"type": "text", "text": "You answer in one word."},
                                         {"type": "text", "text": " Be polite."}],
                              "messages": [*HELLO, {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
                                           {"role": "user", "content": "Again."}], "max_tokens": 16}),
    "stop_sequence": ("own", {"messages": HELLO, "max_tokens": 32, "stop_sequences": ["ello", "never said"]}),
    "max_tokens": ("own", {"messages": COLORS, "max_tokens": 4, "top_k": 1, "top_p": 0.9}),
    "any_tool": ("hermes", {"messages": WEATHER_CALLS, "tools": [WEATHER_TOOL], "tool_choice": {"type": "any"},
                            "max_tokens": 40}),
    "tool_result": ("hermes", {"messages": TOOL_RESULT_TURN, "tools": [WEATHER_TOOL], "max_tokens": 24}),
    # the budget ends the thought after six tokens: a thinking block, then text at index 1
    "thinking": ("qwq", {"messages": HELLO, "max_tokens": 16, "thinking": {"type": "enabled", "budget_tokens": 6}}),
}


def normalized(value: Json) -> Json:
    """Without the message id and the tool-call ids (random on both sides)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()
                if not (k == "id" and isinstance(v, str))}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def post(port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json",
                                                                   **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[tuple[str, Json]]:
    """An Anthropic event stream: (event name, data) pairs; every data line follows its event line."""
    out: list[tuple[str, Json]] = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        out.append((lines[0][len("event: "):], normalized(json.loads(lines[1][len("data: "):]))))
    return out


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path, template_file: Any) -> Iterator[dict[str, LlamaServer]]:
    no_ram_cache = ("--cache-ram", "0")
    servers = {name: LlamaServer(ServerConfig(smollm2_path, template_file(t) if t else None, extra_args=no_ram_cache),
                                 find_llama_server())
               for name, t in (("own", None), ("hermes", HERMES), ("qwq", QWQ))}
    try:
        for s in servers.values():
            s.start()
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.fixture(scope="module")
def pairs(upstream: dict[str, LlamaServer], server: LiveServer, hermes_server: LiveServer,
          qwq_server: LiveServer) -> dict[str, tuple[LlamaServer, LiveServer]]:
    return {"own": (upstream["own"], server), "hermes": (upstream["hermes"], hermes_server),
            "qwq": (upstream["qwq"], qwq_server)}


def reset(ref: LlamaServer, ours: LiveServer) -> None:
    """The same slot cache on both: an unrelated raw prompt evaluated whole."""
    body = {"prompt": "Reset.", "max_tokens": 1, "cache_prompt": False}
    assert post(ref.port, "/v1/completions", body)[0] == 200
    assert post(ours.port, "/v1/completions", body, ours.headers())[0] == 200


@pytest.mark.parametrize("name", list(CASES))
def test_messages_equal_llama_server(name: str, pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    kind, body = CASES[name]
    ref, ours = pairs[kind]
    reset(ref, ours)
    # llama-server's own answer from llamact (upstream_compat, which llama-server drops with the other
    # fields it does not convert): by default thoughts are trimmed and calls sent whole (deviations 4-5)
    plain = {**body, "temperature": 0, "upstream_compat": True}
    status, expected = post(ref.port, "/v1/messages", plain)
    got_status, got = post(ours.port, "/v1/messages", plain, ours.headers())
    assert (got_status, status) == (200, 200), (got, expected)
    expected_json = json.loads(expected)
    assert expected_json["type"] == "message" and expected_json["content"]
    assert normalized(json.loads(got)) == normalized(expected_json)
    streamed = {**plain, "stream": True}
    status, expected = post(ref.port, "/v1/messages", streamed)
    got_status, got = post(ours.port, "/v1/messages", streamed, ours.headers())
    assert (got_status, status) == (200, 200)
    expected_events = events(expected)
    assert [e[0] for e in expected_events[:1] + expected_events[-2:]] == \
        ["message_start", "message_delta", "message_stop"]
    assert events(got) == expected_events


def test_the_cases_show_each_kind_of_block_and_stop(pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    """What the cases above compare is what they are named for, as llama-server answers them (so a
    case that stopped showing its block would be noticed): a call, a thought, a stop sequence, a cut."""
    seen: dict[str, Json] = {}
    for name in ("any_tool", "thinking", "stop_sequence", "max_tokens"):
        kind, body = CASES[name]
        status, raw = post(pairs[kind][0].port, "/v1/messages", {**body, "temperature": 0})
        assert status == 200
        seen[name] = json.loads(raw)
    assert [b["type"] for b in seen["any_tool"]["content"]][-1] == "tool_use"
    assert seen["any_tool"]["stop_reason"] == "tool_use"
    assert [b["type"] for b in seen["thinking"]["content"]] == ["thinking", "text"]
    assert (seen["stop_sequence"]["stop_reason"], seen["stop_sequence"]["stop_sequence"]) == ("end_turn", "ello")
    assert seen["max_tokens"]["stop_reason"] == "max_tokens"


COUNTS: dict[str, tuple[str, Json]] = {
    "plain": ("own", {"messages": HELLO}),
    "system_and_blocks": ("own", CASES["system_blocks"][1]),
    "tools_and_results": ("hermes", {"messages": WEATHER_CALLS, "tools": [WEATHER_TOOL]}),
    "thinking_block": ("qwq", {"messages": [*HELLO, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Greet.", "signature": ""}, {"type": "text", "text": "Hello!"}]},
        {"role": "user", "content": "Again."}]}),
}


@pytest.mark.parametrize("name", list(COUNTS))
def test_count_tokens_equals_llama_server(name: str, pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    kind, body = COUNTS[name]
    ref, ours = pairs[kind]
    status, expected = post(ref.port, "/v1/messages/count_tokens", body)
    got_status, got = post(ours.port, "/v1/messages/count_tokens", body, ours.headers())
    assert (got_status, status) == (200, 200)
    assert json.loads(got) == json.loads(expected) and json.loads(expected)["input_tokens"] > 5


# bodies both servers refuse with the same status, type and message
SAME_ERRORS: dict[str, Json] = {
    "content_missing": {"messages": [{"role": "user"}]},
    "messages_not_objects": {"messages": ["hi"]},
    "content_not_text": {"messages": [{"role": "user", "content": 5}]},
    "max_tokens_out_of_range": {"messages": HELLO, "max_tokens": -5},
}


@pytest.mark.parametrize("name", list(SAME_ERRORS))
def test_errors_equal_llama_server(name: str, pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    ref, ours = pairs["own"]
    status, expected = post(ref.port, "/v1/messages", SAME_ERRORS[name])
    got_status, got = post(ours.port, "/v1/messages", SAME_ERRORS[name], ours.headers())
    assert (got_status, json.loads(got)) == (status, json.loads(expected))
    assert status == 400 and set(json.loads(expected)) == {"error"}


# bodies llama-server refuses with 500 (a std::runtime_error): llamact says the same with 400
# invalid_request_error (docs/design.md deviation 12)
DEVIATING_ERRORS: dict[str, Json] = {
    "messages_missing": {"model": "x", "max_tokens": 4},
    "body_not_an_object": [1, 2],
    "image_without_a_projector": {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "What is this?"}]}]},
}


@pytest.mark.parametrize("name", list(DEVIATING_ERRORS))
def test_a_body_llama_server_fails_on_is_a_400_with_its_text(
        name: str, pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    ref, ours = pairs["own"]
    body = DEVIATING_ERRORS[name]
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        status, expected = post(ref.port, path, body)
        got_status, got = post(ours.port, path, body, ours.headers())
        theirs, mine = json.loads(expected)["error"], json.loads(got)["error"]
        assert (status, theirs["type"]) == (500, "server_error"), (path, theirs)
        assert (got_status, mine["type"], mine["code"]) == (400, "invalid_request_error", 400)
        assert mine["message"] == theirs["message"]


def test_a_named_tool_choice_forces_that_call(pairs: dict[str, tuple[LlamaServer, LiveServer]]) -> None:
    """Deviation 9 on this route: ``{"type": "tool", "name": N}`` makes llamact call N at once;
    llama-server reads it as "required", which on this conversation lets SmolLM2 write text and no
    call (shown below, so the difference is checked, not assumed). A name not among the tools is a
    400 here."""
    ref, ours = pairs["hermes"]
    reset(ref, ours)
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "tool", "name": "get_weather"}, "max_tokens": 60, "temperature": 0}
    _, theirs = post(ref.port, "/v1/messages", body)
    assert [b["type"] for b in json.loads(theirs)["content"]] == ["text"]
    status, raw = post(ours.port, "/v1/messages", body, ours.headers())
    mine = json.loads(raw)
    assert status == 200 and mine["stop_reason"] == "tool_use"
    assert [(b["type"], b["name"], b["input"]["location"]) for b in mine["content"]] == \
        [("tool_use", "get_weather", "Paris")]
    status, raw = post(ours.port, "/v1/messages", {**body, "tool_choice": {"type": "tool", "name": "nope"}},
                       ours.headers())
    assert status == 400 and json.loads(raw)["error"]["type"] == "invalid_request_error"
