"""Wire parity of the Responses routes: the same ``/v1/responses`` requests sent to upstream's
llama-server and to ``llamact serve`` (greedy, one slot, the same context and thread count) give
the same bodies and the same named event sequences, once what differs by nature is removed (ids,
call ids, timestamps, timings); ``/v1/responses/input_tokens`` and ``/v1/chat/completions/input_tokens``
give the same counts; the requests llama-server refuses are refused with its status and message.

Named deviations (docs/design.md, the Responses route), each with its test here: streamed events
carry ``output_index`` / ``content_index``, and ``response.created`` / ``in_progress`` an empty
``output`` with the model (removed before comparing, and checked absent upstream);
``text.format`` constrains the reply (compared with llama-server given the same schema as
``response_format``, which it reads); a named ``tool_choice`` in the flat shape forces the call."""

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

VARYING = {"id", "item_id", "call_id", "created_at", "completed_at", "timings"}
ADDED = ("output_index", "content_index")   # llamact's stream indices (a named deviation)
LIFECYCLE = ("response.created", "response.in_progress")   # llamact adds created_at, model, output: [] (deviation 14)

CITY: Json = {"location": {"type": "string", "description": "City name"}}
TOOL: Json = {"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
              "parameters": {"type": "object", "properties": CITY, "required": ["location"]}}
PERSON: Json = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"]}


def _call(n: int, city: str) -> Json:
    return {"type": "function_call", "call_id": f"call{n}2345", "name": "get_weather",
            "arguments": json.dumps({"location": city})}


def _output(n: int, text: str) -> Json:
    return {"type": "function_call_output", "call_id": f"call{n}2345", "output": text}


# few-shot: earlier turns show a call, so that SmolLM2 reaches the call the grammar admits
WEATHER: Json = [{"role": "user", "content": "Weather in Berlin?"}, _call(1, "Berlin"), _output(1, "12 C"),
                 {"role": "user", "content": "Weather in Rome?"},
                 _call(2, "Rome"), _output(2, "20 C"), {"role": "user", "content": "Weather in Paris?"}]
# llamact is asked for llama-server's own answer (upstream_compat, which llama-server ignores): by
# default it trims thoughts and streams calls whole (docs/design.md deviations 4, 5 and 17)
BASE: Json = {"temperature": 0, "cache_prompt": False, "upstream_compat": True}

# (server, body): each case is sent not streamed and streamed
CASES: dict[str, tuple[str, Json]] = {
    "plain": ("own", {"input": "Say hello.", "max_output_tokens": 12}),
    # instructions, a system item, an earlier answer as an output_text message
    "conversation": ("own", {"instructions": "Answer briefly.", "max_output_tokens": 12, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]},
        {"type": "message", "role": "assistant", "status": "completed", "id": "msg_1",
         "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]},
        {"role": "developer", "content": "Be kind."}, {"role": "user", "content": "Again."}]}),
    "stop_string": ("own", {"input": "Say hello.", "max_output_tokens": 24, "stop": ["!"]}),
    "response_format": ("own", {"input": "Describe a fictional person as JSON with a name and an age.",
                                "max_output_tokens": 40,
                                "response_format": {"type": "json_schema", "json_schema": {"schema": PERSON}}}),
    "required_tool": ("hermes", {"input": WEATHER, "tools": [TOOL], "tool_choice": "required",
                                 "max_output_tokens": 40}),
    # the call's result comes back as a function_call_output item; the model answers with it
    "tool_result_turn": ("hermes", {"input": [*WEATHER, _call(3, "Paris"), _output(3, "18 C")], "tools": [TOOL],
                                    "max_output_tokens": 16}),
    # cut inside the call's tag: no parse has anything, so the reply not streamed is the raw text
    # (as the chat answer) and the stream has no output item at all
    "tool_call_cut_short": ("hermes", {"input": WEATHER, "tools": [TOOL], "max_output_tokens": 4}),
    "reasoning": ("qwq", {"input": "Say hello.", "max_output_tokens": 20,
                          "reasoning": {"effort": "low", "summary": "auto"}}),
    # an earlier thought as a reasoning item, merged into the assistant message that follows it
    "reasoning_item_history": ("qwq", {"max_output_tokens": 12, "input": [
        {"role": "user", "content": "Say hello."},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "A greeting."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": "Again."}]}),
}
# the output item each case is there to reach (the others: a message)
KINDS = {"required_tool": "function_call", "reasoning": "reasoning", "reasoning_item_history": "reasoning"}


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path, template_file: Any) -> Iterator[dict[str, LlamaServer]]:
    servers = {"own": LlamaServer(ServerConfig(smollm2_path), find_llama_server()),
               "hermes": LlamaServer(ServerConfig(smollm2_path, template_file(HERMES)), find_llama_server()),
               "qwq": LlamaServer(ServerConfig(smollm2_path, template_file(QWQ)), find_llama_server())}
    try:
        for s in servers.values():
            s.start()
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.fixture(scope="module")
def ours(server: LiveServer, hermes_server: LiveServer, qwq_server: LiveServer) -> dict[str, LiveServer]:
    return {"own": server, "hermes": hermes_server, "qwq": qwq_server}


def normalized(value: Json) -> Json:
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    return value


def _headers(live: LiveServer | None) -> dict[str, str]:
    return live.headers() if live is not None else {"Content-Type": "application/json"}


def post(port: int, path: str, body: Json, live: LiveServer | None = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body), headers=_headers(live))
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def named_events(port: int, body: Json, live: LiveServer | None = None) -> list[tuple[str, Json]]:
    """A streamed Responses request: each event's name and JSON, in order. The stream must end
    with its last event (no ``[DONE]``), each event's name equal to its ``type``."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", "/v1/responses", body=json.dumps({**body, "stream": True}), headers=_headers(live))
        response = conn.getresponse()
        assert response.status == 200, response.read()[:500]
        assert response.getheader("content-type", "").startswith("text/event-stream")
        text = response.read().decode("utf-8")
    finally:
        conn.close()
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        name, data = lines[0][len("event: "):], json.loads(lines[1][len("data: "):])
        assert data["type"] == name
        out.append((name, data))
    return out


def without_indices(events: list[tuple[str, Json]]) -> list[tuple[str, Json]]:
    """Our events less the indices llamact adds, checked: each item's events carry the index its
    ``output_item.added`` gave it, and a part's events content_index 0."""
    places: dict[str, int] = {}
    out = []
    for name, data in events:
        data = dict(data)
        item_id = data.get("item_id") or data.get("item", {}).get("id")
        if item_id is not None and name != "response.completed":
            at = data.pop("output_index")
            assert places.setdefault(item_id, len(places)) == at, (name, at, places)
        if "content_index" in data:
            assert data.pop("content_index") == 0
        if name in LIFECYCLE:   # llamact's additions for the openai 2.x SDK (created_at is VARYING anyway)
            response = dict(data["response"])
            assert response.pop("output") == [] and isinstance(response.pop("model"), str)
            data["response"] = response
        out.append((name, data))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_responses_equal_llama_server(name: str, upstream: dict[str, LlamaServer], ours: dict[str, LiveServer]) -> None:
    which, body = CASES[name]
    body = {**BASE, **body}
    ref, live = upstream[which], ours[which]
    status, expected = post(ref.port, "/v1/responses", body)
    got_status, got = post(live.port, "/v1/responses", body, live)
    assert (got_status, status) == (200, 200), (got, expected)
    assert expected["status"] == "completed"
    assert {item["type"] for item in expected["output"]} >= {KINDS.get(name, "message")}   # what the case is for
    assert normalized(got) == normalized(expected)

    expected_events = named_events(ref.port, body)
    got_events = named_events(live.port, body, live)
    assert not any(key in data for _, data in expected_events for key in ADDED)   # the deviation's premise
    assert not any("output" in data["response"] for name, data in expected_events if name in LIFECYCLE)
    assert [e for e, _ in expected_events][:2] == ["response.created", "response.in_progress"]
    assert expected_events[-1][0] == "response.completed" and len(expected_events) >= 3
    assert normalized(without_indices(got_events)) == normalized(expected_events)


def test_text_format_constrains_the_reply_as_response_format_does(upstream: dict[str, LlamaServer],
                                                                   server: LiveServer) -> None:
    """A deliberate deviation: llama-server leaves ``text.format`` unread (the reply is free text);
    llamact reads it as the ``response_format`` llama-server does read, and answers as llama-server
    answers that."""
    ask = {**BASE, "input": "Describe a fictional person as JSON with a name and an age.", "max_output_tokens": 40}
    text_format = {**ask, "text": {"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                                              "strict": True}}}
    response_format = {**ask, "response_format": {"type": "json_schema", "json_schema": {"name": "person",
                                                                                         "schema": PERSON}}}
    _, constrained = post(upstream["own"].port, "/v1/responses", response_format)
    _, unread = post(upstream["own"].port, "/v1/responses", text_format)
    _, got = post(server.port, "/v1/responses", text_format, server)
    assert normalized(got) == normalized(constrained)
    person = json.loads(got["output"][0]["content"][0]["text"])
    assert set(person) == {"name", "age"}
    assert normalized(unread) != normalized(constrained)   # upstream ignores it: the premise
    events = named_events(server.port, text_format, server)
    assert normalized(without_indices(events)) == normalized(named_events(upstream["own"].port, response_format))


def test_a_named_tool_choice_in_the_flat_shape_forces_the_call(upstream: dict[str, LlamaServer],
                                                              hermes_server: LiveServer) -> None:
    """A deliberate deviation (deviation 9 for Responses' ``{"type": "function", "name": N}``):
    llama-server reads any object tool_choice as "auto"; llamact forces a call of N at once."""
    body = {**BASE, "input": [{"role": "user", "content": "Say hello."}], "tools": [TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"}, "max_output_tokens": 40}
    _, theirs = post(upstream["hermes"].port, "/v1/responses", body)
    _, auto = post(upstream["hermes"].port, "/v1/responses", {**body, "tool_choice": "auto"})
    assert normalized(theirs) == normalized(auto)   # upstream: the object is "auto"
    _, got = post(hermes_server.port, "/v1/responses", body, hermes_server)
    assert [(o["type"], o.get("name")) for o in got["output"]] == [("function_call", "get_weather")]
    assert "location" in json.loads(got["output"][0]["arguments"])
    status, refused = post(hermes_server.port, "/v1/responses",
                           {**body, "tool_choice": {"type": "function", "name": "nope"}}, hermes_server)
    assert status == 400 and refused["error"]["type"] == "invalid_request_error"


TOKEN_COUNTS: dict[str, tuple[str, str, Json]] = {
    "responses_text": ("own", "/v1/responses/input_tokens", {"input": "Say hello.", "instructions": "Be brief."}),
    "responses_tools": ("hermes", "/responses/input_tokens", {"input": WEATHER, "tools": [TOOL]}),
    "chat": ("own", "/v1/chat/completions/input_tokens", {"messages": [{"role": "user", "content": "Say hello."}]}),
    "chat_tools": ("hermes", "/chat/completions/input_tokens", {
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}]}),
}


@pytest.mark.parametrize("name", sorted(TOKEN_COUNTS))
def test_input_tokens_equal_llama_server(name: str, upstream: dict[str, LlamaServer],
                                         ours: dict[str, LiveServer]) -> None:
    which, path, body = TOKEN_COUNTS[name]
    expected = post(upstream[which].port, path, body)
    got = post(ours[which].port, path, body, ours[which])
    assert got == expected and expected[0] == 200 and expected[1]["input_tokens"] > 10
    assert expected[1]["object"] == "response.input_tokens"


# bodies llama-server refuses in the conversion (status 400, its message)
REFUSED: dict[str, Json] = {
    "no_input": {},
    "not_an_object": [1],
    "input_number": {"input": 5},
    "previous_response_id": {"input": "x", "previous_response_id": "resp_1"},
    "input_file": {"input": [{"role": "user", "content": [{"type": "input_file"}]}]},
    "unknown_part": {"input": [{"role": "user", "content": [{"type": "bogus"}]}]},
    "text_without_text": {"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
    "output_text_without_text": {"input": [{"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text"}]}]},
    "unknown_item": {"input": [{"foo": 1}]},
    "assistant_without_type": {"input": [{"role": "assistant", "content": "hi"}]},
    "empty_reasoning": {"input": [{"type": "reasoning", "summary": [], "content": []}]},
    "tool_output_part_untyped": {"input": [{"type": "function_call_output", "call_id": "a",
                                            "output": [{"text": "x"}]}]},
    "tool_output_part_kind": {"input": [{"type": "function_call_output", "call_id": "a",
                                         "output": [{"type": "output_text", "text": "x"}]}]},
    "tools_not_a_list": {"input": "x", "tools": {}},
    "max_output_tokens_range": {"input": "x", "max_output_tokens": -5},
}


@pytest.mark.parametrize("path", ["/v1/responses", "/responses", "/v1/responses/input_tokens"])
def test_refused_requests_equal_llama_server(path: str, upstream: dict[str, LlamaServer], server: LiveServer) -> None:
    ref = upstream["own"]
    for name, body in REFUSED.items():
        if path.endswith("input_tokens") and name == "max_output_tokens_range":
            continue   # see the next test
        expected = post(ref.port, path, body)
        got = post(server.port, path, body, server)
        assert expected[0] == 400, (name, expected)
        assert got == expected, name


def test_counting_refuses_what_generating_refuses(upstream: dict[str, LlamaServer], server: LiveServer) -> None:
    """A deliberate deviation: llama-server counts a body whose sampling fields it would refuse to
    run (its count reads only the chat fields); llamact reads the whole body as the generation
    route does, and refuses it with that route's answer."""
    body = REFUSED["max_output_tokens_range"]
    status, counted = post(upstream["own"].port, "/v1/responses/input_tokens", body)
    assert status == 200 and counted["input_tokens"] > 0
    refusal = post(upstream["own"].port, "/v1/responses", body)
    assert refusal[0] == 400
    assert post(server.port, "/v1/responses/input_tokens", body, server) == refusal
