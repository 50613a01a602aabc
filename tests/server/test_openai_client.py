"""The official ``openai`` client against a live ``llamact serve`` (SmolLM2, greedy)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from server_live import LiveServer, openai_client

from llamact.parity.server_cases import JSON_PERSON, NAMED_WEATHER, ONE_TOOL, PERSON_SCHEMA, WEATHER_CALLS

pytestmark = pytest.mark.model

HELLO = [{"role": "user", "content": "Say hello."}]
GREEDY: dict[str, Any] = {"temperature": 0, "extra_body": {"cache_prompt": False}}


def collect(stream: Any) -> tuple[list[Any], dict[str, Any]]:
    """The chunks of a streamed answer and the message they add up to (tool calls by index)."""
    chunks = list(stream)
    content, reasoning = "", ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                slot = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                if call.id:
                    assert slot["id"] is None, "a tool call's id is sent once, when the call starts"
                    slot["id"] = call.id
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
    return chunks, {"content": content, "reasoning": reasoning, "tool_calls": [calls[i] for i in sorted(calls)]}


def test_chat_non_streaming(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model="any", messages=HELLO, max_tokens=12, **GREEDY)
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert answer.usage is not None and answer.usage.completion_tokens > 0 and answer.usage.prompt_tokens > 0


def test_chat_streaming_equals_non_streaming(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="any", messages=HELLO, max_tokens=12, **GREEDY)
    chunks, streamed = collect(client.chat.completions.create(model="any", messages=HELLO, max_tokens=12,
                                                              stream=True, **GREEDY))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert streamed["content"] == whole.choices[0].message.content


def test_include_usage_sends_a_usage_chunk(client: openai.OpenAI) -> None:
    chunks, _ = collect(client.chat.completions.create(model="any", messages=HELLO, max_tokens=6, stream=True,
                                                       stream_options={"include_usage": True}, **GREEDY))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6
    assert all(c.usage is None for c in chunks[:-1])
    plain, _ = collect(client.chat.completions.create(model="any", messages=HELLO, max_tokens=6, stream=True,
                                                      **GREEDY))
    assert all(c.usage is None for c in plain) and plain[-1].choices


@pytest.mark.parametrize("tool_choice", ["required", NAMED_WEATHER, "auto"], ids=["required", "named", "auto"])
def test_tool_calls_reassembled_from_deltas(hermes_server: LiveServer, tool_choice: Any) -> None:
    client = openai_client(hermes_server)
    # the prompt cache on: the three choices share the long tool prompt, evaluated once
    args: dict[str, Any] = {"model": "any", "messages": WEATHER_CALLS, "tools": ONE_TOOL, "tool_choice": tool_choice,
                            "max_tokens": 60, "temperature": 0}
    whole = client.chat.completions.create(**args)
    _, streamed = collect(client.chat.completions.create(**args, stream=True))
    calls = whole.choices[0].message.tool_calls or []
    assert calls and whole.choices[0].finish_reason == "tool_calls"   # SmolLM2 calls through Hermes' template
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"location": "Paris"}
    assert [(c["name"], c["arguments"]) for c in streamed["tool_calls"]] == [
        (c.function.name, c.function.arguments) for c in calls]
    assert all(c["id"] for c in streamed["tool_calls"])
    assert streamed["content"] == (whole.choices[0].message.content or "")


def test_reasoning_content_in_the_extra_fields(r1_server: LiveServer) -> None:
    """The template opens a thought: what the model writes until its end tag is reasoning_content."""
    client = openai_client(r1_server)
    whole = client.chat.completions.create(model="any", messages=HELLO, max_tokens=16, **GREEDY)
    thinking = (whole.choices[0].message.model_extra or {}).get("reasoning_content")
    assert thinking and not whole.choices[0].message.content
    _, streamed = collect(client.chat.completions.create(model="any", messages=HELLO, max_tokens=16, stream=True,
                                                         **GREEDY))
    assert streamed["reasoning"] == thinking and streamed["content"] == ""


def test_response_format_json_schema(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model="any", messages=JSON_PERSON, response_format=PERSON_SCHEMA,
                                            max_tokens=60, **GREEDY)
    person = json.loads(answer.choices[0].message.content or "")
    schema = PERSON_SCHEMA["json_schema"]["schema"]
    assert set(schema.get("required", [])) <= set(person)


def test_models(client: openai.OpenAI, smollm2_path: Any) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == [str(smollm2_path)]   # llama-server's name: the path as given


def test_invalid_key_is_401(server: LiveServer) -> None:
    bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model="any", messages=HELLO, max_tokens=2)
    assert caught.value.status_code == 401
    assert caught.value.body == {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}
    status, _ = server.request("GET", "/health", headers={})   # public, as llama-server's
    assert status == 200


def test_malformed_json_is_400(server: LiveServer) -> None:
    status, body = server.request("POST", "/v1/chat/completions", b'{"messages": [')
    assert status == 400
    error = json.loads(body)["error"]
    assert error["code"] == 400 and error["type"] == "invalid_request_error"


def test_missing_messages_is_400_with_upstream_message(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/chat/completions", body={"max_tokens": 2}, cast_to=object)
    assert "'messages' is required" in str(caught.value)


def test_completions_with_logprobs_as_an_int(client: openai.OpenAI) -> None:
    """``logprobs: 2`` on the legacy completions API is llama-server's ``n_probs``: each token of the
    answer with its two most likely alternatives (llama-server's entries, under ``content``), streamed
    and not, the same tokens both ways."""
    whole = client.completions.create(model="any", prompt="Once upon a time", max_tokens=5, logprobs=2, **GREEDY)
    entries = (whole.choices[0].logprobs.model_extra or {})["content"]
    assert len(entries) == whole.usage.completion_tokens == 5
    assert all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in entries)
    assert "".join(e["token"] for e in entries) == whole.choices[0].text
    streamed = list(client.completions.create(model="any", prompt="Once upon a time", max_tokens=5, logprobs=2,
                                              stream=True, **GREEDY))
    tokens = [e["token"] for c in streamed if c.choices and c.choices[0].logprobs
              for e in (c.choices[0].logprobs.model_extra or {})["content"]]
    assert tokens == [e["token"] for e in entries]
