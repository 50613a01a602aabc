"""The Responses stream writer on chunks made here (no model): what no greedy SmolLM2 answer in the
wire-parity cases reaches. The final parse's deltas are not streamed -- llama-server's final result
writes only the ``*.done`` events (server-task.cpp ``to_json_oaicompat_resp_stream``) -- but the done
events and ``response.completed`` show the whole final message."""

from __future__ import annotations

from llamact.chat.deltas import ToolCallDelta
from llamact.chat.messages import ChatMessage, ToolCall
from llamact.engine.chat_types import ChatChunk, Usage
from llamact.server.responses.stream import ResponseEvents
from llamact.server.responses.wire import ResponseIds


def test_final_parse_deltas_show_only_in_the_done_events() -> None:
    events = ResponseEvents(ResponseIds(), "m")
    message = ChatMessage(role="assistant", content="Hi there", tool_calls=[ToolCall("f", '{"a": 1}', "X")])
    chunks = [ChatChunk(role="assistant"), ChatChunk(content="Hi"),
              ChatChunk(tool_calls=(ToolCallDelta(0, "X", "f", '{"a"'),)),
              ChatChunk(content=" there", final_parse=True),
              ChatChunk(tool_calls=(ToolCallDelta(0, None, None, ': 1}'),), final_parse=True),
              ChatChunk(finish_reason="tool_calls", usage=Usage(5, 3))]
    out = [e for chunk in chunks for e in events.of(chunk, message)]
    names = [e["event"] for e in out]
    assert names == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.output_text.done",
                     "response.content_part.done", "response.output_item.done", "response.output_item.done",
                     "response.completed"]
    deltas = [e["data"]["delta"] for e in out if e["event"].endswith(".delta")]
    assert deltas == ["Hi", '{"a"']
    done = out[-1]["data"]["response"]
    assert [item["type"] for item in done["output"]] == ["message", "function_call"]
    assert done["output"][0]["content"][0]["text"] == "Hi there" and done["output"][1]["arguments"] == '{"a": 1}'
    assert done["usage"] == {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8,
                             "input_tokens_details": {"cached_tokens": 0}}
    # each item keeps the output_index its output_item.added gave it
    assert [e["data"]["output_index"] for e in out if e["event"] == "response.output_item.added"] == [0, 1]
    assert [e["data"]["output_index"] for e in out if e["event"] == "response.output_item.done"] == [0, 1]
    assert out[-1]["data"]["response"]["output"][1]["call_id"] == "call_X"


def test_the_lifecycle_events_carry_an_output_list_for_openai_2() -> None:
    """``response.created`` / ``response.in_progress`` carry ``created_at``, ``model`` and ``output: []``
    beside llama-server's ``id`` / ``object`` / ``status`` (docs/design.md deviation 14): the openai 2.x
    SDK's stream helper (2.54, which openai-agents used before 3.x) appends each added item to the
    created response's ``output`` and raised AttributeError on None; the completed response keeps the
    same creation time."""
    events = ResponseEvents(ResponseIds(), "SmolLM2-135M-Instruct.Q4_1.gguf")
    message = ChatMessage(role="assistant", content="Hi")
    out = [e for chunk in (ChatChunk(role="assistant"), ChatChunk(content="Hi"),
                           ChatChunk(finish_reason="stop", usage=Usage(2, 1))) for e in events.of(chunk, message)]
    created, progress, completed = out[0]["data"]["response"], out[1]["data"]["response"], out[-1]["data"]["response"]
    for response in (created, progress):
        assert response["output"] == [] and response["status"] == "in_progress"
        assert response["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and isinstance(response["created_at"], int)
        assert response["id"] == completed["id"] and response["object"] == "response"
    assert completed["created_at"] == created["created_at"] and len(completed["output"]) == 1
