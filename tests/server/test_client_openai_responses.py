"""Real clients of the Responses route against a live ``llamact serve`` (SmolLM2, greedy): the
``openai`` SDK's ``client.responses.create`` (whole, and ``stream=True``) and its stream helper
``client.responses.stream``, and an openai-agents ``Agent`` on its default model (the Responses
model) calling a ``@function_tool`` through ``Runner.run_sync``. What the model says is the
server's business (tests/server/test_wire_parity_responses.py ties it to llama-server); here the
clients must read every answer, and what they read must be what the server sent."""

from __future__ import annotations

import http.client
import json
from typing import Any

import openai
import pytest
from server_live import HOST, LiveServer, openai_client

pytestmark = pytest.mark.model

GREEDY: dict[str, Any] = {"temperature": 0, "extra_body": {"cache_prompt": False}}
TOOL: dict[str, Any] = {
    "type": "function", "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name"}},
                   "required": ["location"]}}


def _call(n: int, city: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"call{n}2345", "name": "get_weather",
            "arguments": json.dumps({"location": city})}


def _output(n: int, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call{n}2345", "output": text}


WEATHER = [{"role": "user", "content": "Weather in Berlin?"}, _call(1, "Berlin"), _output(1, "12 C"),
           {"role": "user", "content": "Weather in Rome?"}, _call(2, "Rome"), _output(2, "20 C"),
           {"role": "user", "content": "Weather in Paris?"}]


def raw(live: LiveServer, path: str, body: dict[str, Any]) -> Any:
    conn = http.client.HTTPConnection(HOST, live.port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body), headers=live.headers())
        response = conn.getresponse()
        assert response.status == 200
        return json.loads(response.read())
    finally:
        conn.close()


def test_create_reads_the_answer(server: LiveServer, client: openai.OpenAI) -> None:
    response = client.responses.create(model="any", input="Say hello.", max_output_tokens=12, **GREEDY)
    sent = raw(server, "/v1/responses", {"input": "Say hello.", "max_output_tokens": 12, "temperature": 0,
                                         "cache_prompt": False})
    assert response.status == "completed" and response.output_text
    assert response.output_text == sent["output"][0]["content"][0]["text"]
    counted = raw(server, "/v1/responses/input_tokens", {"input": "Say hello."})["input_tokens"]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (counted, sent["usage"]["output_tokens"])
    assert client.responses.input_tokens.count(model="any", input="Say hello.").input_tokens == counted


def test_streamed_events_and_the_stream_helper(client: openai.OpenAI) -> None:
    args: dict[str, Any] = {"model": "any", "input": "Say hello.", "max_output_tokens": 12, **GREEDY}
    events = list(client.responses.create(stream=True, **args))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"] and kinds[-1] == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text and final.output_text == text and final.usage.output_tokens > 0
    # the helper places every delta by its output_index / content_index and rebuilds the response
    with client.responses.stream(**args) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        rebuilt = stream.get_final_response()
    assert deltas == text and rebuilt.output_text == text


def test_a_function_tool_is_called(hermes_server: LiveServer) -> None:
    client = openai_client(hermes_server)
    args: dict[str, Any] = {"model": "any", "input": WEATHER, "tools": [TOOL], "tool_choice": "required",
                            "max_output_tokens": 40, **GREEDY}
    response = client.responses.create(**args)
    calls = [item for item in response.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    assert isinstance(json.loads(calls[0].arguments)["location"], str)
    assert calls[0].call_id.startswith("call_") and calls[0].id.startswith("fc_")
    with client.responses.stream(**args) as stream:
        pieces = "".join(e.delta for e in stream if e.type == "response.function_call_arguments.delta")
        rebuilt = stream.get_final_response()
    streamed = [item for item in rebuilt.output if item.type == "function_call"]
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in calls]
    assert pieces and json.loads(pieces) == json.loads(calls[0].arguments)


def test_an_agent_calls_its_function_tool_and_finishes(hermes_server: LiveServer) -> None:
    """openai-agents on its default (Responses) model: the named tool choice forces the call (the
    tiny model would not call otherwise), the tool runs with the parsed arguments, its result goes
    back as a function_call_output item, and the agent's next turn (tool choice reset) ends the run."""
    from agents import Agent, ModelSettings, Runner, function_tool, set_default_openai_client, set_tracing_disabled
    from agents.items import ToolCallOutputItem

    set_tracing_disabled(True)
    set_default_openai_client(openai.AsyncOpenAI(base_url=hermes_server.base_url + "/v1", api_key="none",
                                                 max_retries=0, timeout=300), use_for_tracing=False)
    asked: list[str] = []

    @function_tool
    def get_weather(location: str) -> str:
        """Get the current weather for a city."""
        asked.append(location)
        return "18 C"

    agent = Agent(name="weather", instructions="You answer weather questions with the get_weather tool.",
                  tools=[get_weather], model_settings=ModelSettings(
                      tool_choice="get_weather", temperature=0, max_tokens=40, extra_body={"cache_prompt": False}))
    result = Runner.run_sync(agent, "Weather in Paris?", max_turns=3)
    assert len(asked) == 1 and isinstance(asked[0], str) and asked[0]
    assert [o.type for o in result.raw_responses[0].output] == ["function_call"]
    assert [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)] == ["18 C"]
    assert isinstance(result.final_output, str) and result.final_output
    assert len(result.raw_responses) == 2
