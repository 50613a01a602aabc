"""Anthropic's own Python SDK against a live ``llamact serve``: the Messages API's mechanics as a real
client sees them -- a tool round trip, both ways of streaming, token counting, the API key in
``x-api-key``. The tiny model is held to mechanics: greedy, a forced tool choice, short replies; what
the answers must be equal to is tests/server/test_wire_parity_anthropic.py's business."""

from __future__ import annotations

import anthropic
import pytest
from server_live import API_KEY, LiveServer

pytestmark = [pytest.mark.model, pytest.mark.slow]

MODEL = "smollm2"   # the server answers whatever the client names
WEATHER_TOOL = {"name": "get_weather", "description": "Get the current weather for a city",
                "input_schema": {"type": "object", "properties": {"location": {"type": "string"}},
                                 "required": ["location"]}}
HELLO = [{"role": "user", "content": "Say hello."}]
# this SDK (2.16) has no temperature parameter any more; llama-server's route still reads the field
GREEDY = {"temperature": 0}


def _client(live: LiveServer, key: str = API_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.base_url, api_key=key, max_retries=0, timeout=120)


def test_a_tool_round_trip(hermes_server: LiveServer) -> None:
    """tool_use out (the named choice forces it), the tool_result back in, a text answer."""
    client = _client(hermes_server)
    question = {"role": "user", "content": "Weather in Paris?"}
    first = client.messages.create(model=MODEL, max_tokens=60, extra_body=GREEDY, messages=[question],
                                   tools=[WEATHER_TOOL], tool_choice={"type": "tool", "name": "get_weather"})
    assert first.stop_reason == "tool_use" and first.role == "assistant"
    call = first.content[-1]
    assert isinstance(call, anthropic.types.ToolUseBlock) and call.name == "get_weather"
    assert isinstance(call.input, dict) and isinstance(call.input["location"], str) and call.id
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C, sunny"}]}
    final = client.messages.create(model=MODEL, max_tokens=24, extra_body=GREEDY, tools=[WEATHER_TOOL],
                                   messages=[question, {"role": "assistant", "content": first.content}, result])
    assert final.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert final.content and final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) > \
        first.usage.input_tokens + (first.usage.cache_read_input_tokens or 0)


def test_the_stream_helper_gives_the_streamed_text_as_its_final_message(server: LiveServer) -> None:
    with _client(server).messages.stream(model=MODEL, max_tokens=16, extra_body=GREEDY, messages=HELLO) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and [b.type for b in final.content] == ["text"]
    assert final.content[0].text == text   # type: ignore[union-attr]
    assert final.stop_reason in ("end_turn", "max_tokens") and final.usage.output_tokens > 0


def test_stream_true_gives_the_event_sequence(server: LiveServer) -> None:
    events = list(_client(server).messages.create(model=MODEL, max_tokens=8, extra_body=GREEDY, messages=HELLO,
                                                  stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and "content_block_delta" in kinds and "content_block_stop" in kinds
    assert events[-2].delta.stop_reason == "max_tokens" and events[-2].usage.output_tokens == 8  # type: ignore[union-attr]


def test_a_thought_streams_as_a_thinking_block(qwq_server: LiveServer) -> None:
    """The SDK takes the thinking deltas and the empty signature_delta into a ThinkingBlock."""
    with _client(qwq_server).messages.stream(model=MODEL, max_tokens=16, extra_body=GREEDY, messages=HELLO,
                                             thinking={"type": "enabled", "budget_tokens": 6}) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking and final.content[0].signature == ""   # type: ignore[union-attr]


def test_count_tokens_counts_the_prompt_a_generation_reads(server: LiveServer) -> None:
    client = _client(server)
    system = "You are terse."
    counted = client.messages.count_tokens(model=MODEL, system=system, messages=HELLO)
    reply = client.messages.create(model=MODEL, max_tokens=1, system=system, messages=HELLO)
    assert counted.input_tokens == reply.usage.input_tokens + (reply.usage.cache_read_input_tokens or 0) > 5


def test_a_wrong_key_is_an_authentication_error(server: LiveServer) -> None:
    with pytest.raises(anthropic.AuthenticationError):
        _client(server, "wrong").messages.create(model=MODEL, max_tokens=1, messages=HELLO)
